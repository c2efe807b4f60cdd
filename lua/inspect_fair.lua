-- The inspector, for a fair semaphore (inspect.lua found its hash): its hash,
-- line, client deadlines and leases, read in one script, so that the snapshot
-- is consistent, and written by nothing. A script of its own, called only for
-- a fair semaphore: an inspector whose ACL grants Redisson's keys alone
-- still reads every other kind (its keys are this crate's own).
--
-- KEYS[1]  the name: the fair semaphore's HASH
-- KEYS[2]  its line (LIST of waiter ids)
-- KEYS[3]  its client deadlines (ZSET client id -> epoch ms)
-- KEYS[4]  its leases (ZSET hold id -> epoch ms)
-- ARGV[1]  the most entries read of any one list, zset or hash
--
-- Reply: { server time in ms, type of KEYS[1], body (field, value, ..., then
--          the hash's length; {} when it is no hash), line, line length,
--          deadlines (member, score, ...), leases (member, score, ...),
--          leases count }

local name, line_key, deadlines_key, leases_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local bound = tonumber(ARGV[1])

local function type_of(key)
    return redis.call('type', key).ok
end

local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local kind = type_of(name)
local body = {}
if kind == 'hash' then
    local length = redis.call('hlen', name)
    local fields
    if length <= bound then
        fields = redis.call('hkeys', name)
    else
        local sample = redis.call('hscan', name, 0, 'count', bound)[2]
        fields = {}
        for i = 1, #sample, 2 do
            table.insert(fields, sample[i])
        end
    end
    for _, field in ipairs(fields) do
        table.insert(body, field)
        table.insert(body, redis.call('hget', name, field))
    end
    table.insert(body, length)
end

local line, line_length, deadlines, leases, leases_count = {}, 0, {}, {}, 0
if type_of(line_key) == 'list' then
    line = redis.call('lrange', line_key, 0, bound - 1)
    line_length = redis.call('llen', line_key)
end
if type_of(deadlines_key) == 'zset' then
    deadlines = redis.call('zrange', deadlines_key, 0, bound - 1, 'withscores')
end
if type_of(leases_key) == 'zset' then
    leases = redis.call('zrange', leases_key, 0, bound - 1, 'withscores')
    leases_count = redis.call('zcard', leases_key)
end

return { now, kind, body, line, line_length, deadlines, leases, leases_count }
