-- Fair lock: release one hold and wake the first in line. (fair_common.lua is
-- prepended.)
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue LIST
-- KEYS[3]  the deadline ZSET
-- KEYS[4]  the channel prefix, redisson_lock__channel:{name}
-- ARGV[1]  the unlock message ("0")
-- ARGV[2]  lease in milliseconds: the remaining holds live at least this long
-- ARGV[3]  owner field
-- ARGV[4]  now, epoch milliseconds
-- ARGV[5]  the publish command
-- ARGV[6]  the least time the next in line gets to take the lock (grace), ms
-- ARGV[7]  the most time it gets (the configured fair-lock wait), ms
-- ARGV[8]  the releasing client's own next waiter (its owner field), or ""
-- ARGV[9]  that waiter's lease in milliseconds
--
-- Reply: nil when the owner holds no hold; 0 when holds remain; 1 when the lock
--        is free and nobody is in line; 3 when it is free and the first in line
--        (not the named waiter) was woken; 2 when the lock went to the named
--        next waiter, which was first in line.
--
-- The grant to the named waiter does what that waiter's own acquire would
-- (fair_acquire.lua, taking a free lock as first in line), so a Java client
-- sees a state its own scripts make. It is never made to a waiter the caller
-- did not name: a Java head granted behind its back would take its own
-- acquire for a re-entry and count two holds.

local lock, queue, timeouts, channel_prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, lease, owner = ARGV[1], ARGV[2], ARGV[3]
local now, publish = tonumber(ARGV[4]), ARGV[5]
local grace, cap = tonumber(ARGV[6]), tonumber(ARGV[7])
local heir, heir_lease = ARGV[8], tonumber(ARGV[9])
if heir == '' then
    heir = nil
end

-- The named waiter is alive (its client says so): never evicted here.
local head = evict_stale_heads(lock, queue, timeouts, now, heir, cap)
line_expires(queue, timeouts, cap)

local held = redis.call('hget', lock, owner)
if held == false then
    -- Not ours. If the lock is gone altogether (expired), make sure the first in
    -- line is not left asleep.
    if redis.call('exists', lock) == 0 then
        hand_to_head(queue, timeouts, channel_prefix, publish, message, now, grace, cap, head)
    end
    return nil
end

-- More holds than this one (or not a count, which HINCRBY reports): one fewer.
if held ~= '1' and redis.call('hincrby', lock, owner, -1) > 0 then
    if redis.call('pttl', lock) < tonumber(lease) then
        redis.call('pexpire', lock, lease)
    end
    return 0
end

redis.call('del', lock)
if heir ~= nil and head == heir then
    redis.call('lpop', queue)
    redis.call('zrem', timeouts, heir)
    local next_head = redis.call('lindex', queue, 0)
    if next_head ~= false then
        redis.call('zadd', timeouts, now + heir_lease + cap, next_head)
    end
    redis.call('hset', lock, heir, 1)
    redis.call('pexpire', lock, heir_lease)
    return 2
end
if hand_to_head(queue, timeouts, channel_prefix, publish, message, now, grace, cap, head) then
    return 3
end
return 1
