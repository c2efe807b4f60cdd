-- The inspectors' shared reading (prepended to inspect.lua and
-- inspect_fair.lua): a key's type, the server's clock, and a hash's fields
-- and values within a bound. Nothing here writes.

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
