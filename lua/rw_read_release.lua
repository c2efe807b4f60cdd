-- Read-write lock: release one read hold. (rw_common.lua is prepended.)
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- ARGV[1]  the unlock message ("0")
-- ARGV[2]  owner field
-- ARGV[3]  the publish command
--
-- Reply: nil when the owner holds no read hold; 0 when the lock stays held (by
--        others' reads, its own other reads, or its write); 1 when it is free and a
--        waiter was woken.

local lock, channel = KEYS[1], KEYS[2]
local message, owner, publish = ARGV[1], ARGV[2], ARGV[3]

if redis.call('hexists', lock, owner) == 0 then
    return nil
end

-- Drop one hold: the one with the least time left, so that no hold a guard still
-- counts on ends early (holds are not told apart by guard). Keys stay numbered
-- 1..n: the top key takes the dropped one's place.
local count = tonumber(redis.call('hget', lock, owner))
local shortest, shortest_ttl = count, nil
for i = 1, count do
    local ttl = redis.call('pttl', read_hold_key(lock, owner, i))
    if shortest_ttl == nil or ttl < shortest_ttl then
        shortest, shortest_ttl = i, ttl
    end
end
if shortest ~= count then
    if redis.call('exists', read_hold_key(lock, owner, count)) == 1 then
        redis.call('rename', read_hold_key(lock, owner, count), read_hold_key(lock, owner, shortest))
    else
        redis.call('del', read_hold_key(lock, owner, shortest))
    end
else
    redis.call('del', read_hold_key(lock, owner, count))
end
local holds = redis.call('hincrby', lock, owner, -1)
if holds == 0 then
    redis.call('hdel', lock, owner)
end

if redis.call('hlen', lock) > 1 then
    local mode = redis.call('hget', lock, 'mode')
    local longest = longest_read_hold(lock)
    if mode == 'write' then
        -- The owner's write hold remains: keep at least the write lease.
        if longest > 0 then
            extend(lock, longest)
        end
        return 0
    end
    if longest > 0 then
        -- Live readers remain: the lock lives as long as the longest of them.
        redis.call('pexpire', lock, longest)
        return 0
    end
    -- Only vanished readers remain: they hold nothing any more.
end

redis.call('del', lock)
redis.call(publish, channel, message)
return 1
