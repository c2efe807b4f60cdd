-- Read-write lock: helpers prepended to every rw_*.lua script before it is loaded
-- (scripts.rs concatenates them).
--
-- The lock is one HASH: field "mode" = "read" | "write", one field per reader
-- owner counting its read holds, and the writer's field "<owner>:write" counting
-- its write holds. Each read hold i of owner O also has its own STRING key
-- "{name}:O:rwlock_timeout:i" whose TTL is that hold's lease, so a reader that
-- vanished stops keeping the lock alive when its own holds expire.

-- The hash-tagged base of the lock's auxiliary keys: "{name}", or the name itself
-- when it carries its own tag (Redisson's suffixName rule).
local function key_base(lock)
    if string.find(lock, '{', 1, true) then
        return lock
    end
    return '{' .. lock .. '}'
end

-- The key of read hold `i` of `owner`.
local function read_hold_key(lock, owner, i)
    return key_base(lock) .. ':' .. owner .. ':rwlock_timeout:' .. i
end

local function is_writer_field(field)
    return string.sub(field, -6) == ':write'
end

-- The longest remaining TTL among every live read hold of every reader (-3 when
-- there is none). Holds whose keys expired (their reader vanished) do not count.
local function longest_read_hold(lock)
    local longest = -3
    for _, field in ipairs(redis.call('hkeys', lock)) do
        if field ~= 'mode' and not is_writer_field(field) then
            local holds = tonumber(redis.call('hget', lock, field)) or 0
            for i = 1, holds do
                longest = math.max(longest, redis.call('pttl', read_hold_key(lock, field, i)))
            end
        end
    end
    return longest
end

-- Sets the hash's TTL to at least `ms` (never shortening it).
local function extend(lock, ms)
    if redis.call('pttl', lock) < tonumber(ms) then
        redis.call('pexpire', lock, ms)
    end
end
