-- Fair lock: release every hold of every owner and wake the first in line.
-- (fair_common.lua is prepended.)
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue LIST
-- KEYS[3]  the deadline ZSET
-- KEYS[4]  the channel prefix, redisson_lock__channel:{name}
-- ARGV[1]  the unlock message ("0")
-- ARGV[2]  now, epoch milliseconds
-- ARGV[3]  the publish command
-- ARGV[4]  the least time the next in line gets to take the lock (grace), ms
-- ARGV[5]  the most time it gets (the configured fair-lock wait), ms
--
-- Reply: 1 when a lock was deleted, 0 when there was none.

local lock, queue, timeouts, channel_prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, now, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local grace, cap = tonumber(ARGV[4]), tonumber(ARGV[5])

local head = evict_stale_heads(lock, queue, timeouts, now, nil, cap)
line_expires(queue, timeouts, cap)
if redis.call('del', lock) == 1 then
    hand_to_head(queue, timeouts, channel_prefix, publish, message, now, grace, cap, head)
    return 1
end
return 0
