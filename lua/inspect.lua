-- The inspector: reads, and never writes, everything that lives under one
-- lock-family name, in one script so that the snapshot is consistent (nothing
-- can change between its parts). rw_common.lua (read_hold_key,
-- is_writer_field) and inspect_common.lua are prepended.
--
-- KEYS[1]  the name: a lock's HASH, or a synchronizer's STRING
-- KEYS[2]  the fair lock's queue (LIST of owner fields)
-- KEYS[3]  the fair lock's waiter deadlines (ZSET owner field -> epoch ms)
-- KEYS[4]  the fenced lock's token counter (STRING)
-- KEYS[5]  the permit-expirable semaphore's leases (ZSET permit id -> epoch ms)
-- ARGV[1]  the most entries read of any one list, zset or hash (bounds the
--          reply and the script's time on a huge or foreign key)
--
-- Reply: { server time in ms, type of KEYS[1], PTTL of KEYS[1], body,
--          queue, queue length, deadlines (member, score, ...),
--          token or false, leases (member, score, ...), leases count,
--          read hold TTLs }
--   body: for a hash, its fields and values (field, value, ...) up to the
--   bound, a value longer than LONGEST_VALUE as '', then the hash's length;
--   for a string, { value }, or {} when it is longer; otherwise {}.
--   read hold TTLs: for each reader field of a read-write hash, in the body's
--   order, { field, PTTL of hold 1, PTTL of hold 2, ... }, at most ARGV[1]
--   PTTLs in all.

local name, queue_key, deadlines_key, token_key, leases_key =
    KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local bound = tonumber(ARGV[1])

local now = server_now_ms()

local kind = type_of(name)
local body = {}
local read_ttls = {}
if kind == 'hash' then
    body = hash_body(name, bound)
    if redis.call('hexists', name, 'mode') == 1 then
        -- One budget for every read hold's PTTL, however the holds spread.
        local budget = bound
        for i = 1, #body - 1, 2 do
            local field = body[i]
            if field ~= 'mode' and not is_writer_field(field) then
                local holds = math.min(tonumber(body[i + 1]) or 0, budget)
                budget = budget - holds
                local ttls = { field }
                for hold = 1, holds do
                    table.insert(ttls, redis.call('pttl', read_hold_key(name, field, hold)))
                end
                table.insert(read_ttls, ttls)
            end
        end
    end
elseif kind == 'string' then
    if redis.call('strlen', name) <= LONGEST_VALUE then
        body = { redis.call('get', name) }
    end
end

local queue, queue_length = list_head(queue_key, bound)
local deadlines = zset_head(deadlines_key, bound)

local token = false
if type_of(token_key) == 'string' and redis.call('strlen', token_key) <= LONGEST_VALUE then
    token = redis.call('get', token_key)
end

local leases, leases_count = zset_head(leases_key, bound)

return { now, kind, redis.call('pttl', name), body, queue, queue_length, deadlines,
    token, leases, leases_count, read_ttls }
