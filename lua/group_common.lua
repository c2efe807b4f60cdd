-- Redisson's single-hash multi-lock (getMultiLock(group, values)): one hash per
-- group, and for each member id (see keys.rs, group_member_id):
--   <id>                        the owner holding that member
--   <id>:<owner>:expire_time    when that hold ends, epoch milliseconds
--   <id>:<owner>:lock_count     how many holds the owner has
-- The hash's own TTL covers the longest hold in it. A member whose expire_time
-- has passed is free, whatever its fields still say.
--
-- Time is the server's (TIME), so every client of this crate agrees on when a
-- hold ends; Redisson's Java clients use their own wall clocks (DESIGN.md).

if redis.replicate_commands then
    redis.replicate_commands()
end

local function now_ms()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function expire_field(id, owner)
    return id .. ':' .. owner .. ':expire_time'
end

local function count_field(id, owner)
    return id .. ':' .. owner .. ':lock_count'
end

-- When `owner`'s hold of member `id` ends, or nil when it holds none (or one
-- that has ended).
local function hold_end(group, id, owner, now)
    if redis.call('hget', group, id) ~= owner then
        return nil
    end
    local ends = tonumber(redis.call('hget', group, expire_field(id, owner)))
    if ends == nil or ends < now then
        return nil
    end
    return ends
end

-- Pushes the end of `owner`'s hold of `id` to at least now + lease.
local function extend_hold(group, id, owner, now, lease)
    local field = expire_field(id, owner)
    local ends = tonumber(redis.call('hget', group, field))
    if ends == nil or ends < now + lease then
        redis.call('hset', group, field, now + lease)
    end
end

-- Extends, never shortens, the hash's TTL.
local function extend_ttl(group, lease)
    if redis.call('pttl', group) < lease then
        redis.call('pexpire', group, lease)
    end
end
