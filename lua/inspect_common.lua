-- The inspectors' shared reading (prepended to inspect.lua and
-- inspect_fair.lua): a key's type, the server's clock, and a hash's, a
-- list's or a zset's entries within a bound. Nothing here writes.

local function type_of(key)
    return redis.call('type', key).ok
end

local function server_now_ms()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The longest value read of a string or a hash field: a count, a token or
-- an owner field is far shorter; a longer value (a cached blob) marks a key
-- that is no lock, and is not sent back.
local LONGEST_VALUE = 128

-- The hash `name` as a flat list: field, value, ... (a value longer than
-- LONGEST_VALUE as ''), at most `bound` fields, then the hash's length.
local function hash_body(name, bound)
    local body = {}
    local length = redis.call('hlen', name)
    local fields
    if length <= bound then
        fields = redis.call('hkeys', name)
    else
        -- A foreign hash this large is no lock: a sample says what it is.
        local sample = redis.call('hscan', name, 0, 'count', bound)[2]
        fields = {}
        for i = 1, #sample, 2 do
            table.insert(fields, sample[i])
        end
    end
    for _, field in ipairs(fields) do
        table.insert(body, field)
        if redis.call('hstrlen', name, field) <= LONGEST_VALUE then
            table.insert(body, redis.call('hget', name, field))
        else
            table.insert(body, '')
        end
    end
    table.insert(body, length)
    return body
end

-- The first `bound` entries of the list `key` and its length ({} and 0 when
-- it is no list).
local function list_head(key, bound)
    if type_of(key) ~= 'list' then
        return {}, 0
    end
    return redis.call('lrange', key, 0, bound - 1), redis.call('llen', key)
end

-- The first `bound` members of the zset `key` with their scores (member,
-- score, ...) and its size ({} and 0 when it is no zset).
local function zset_head(key, bound)
    if type_of(key) ~= 'zset' then
        return {}, 0
    end
    return redis.call('zrange', key, 0, bound - 1, 'withscores'), redis.call('zcard', key)
end
