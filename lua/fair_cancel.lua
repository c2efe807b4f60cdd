-- Fair lock: a waiter leaves the queue (gave up, or its call was cancelled).
-- (fair_common.lua is prepended.)
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue LIST
-- KEYS[3]  the deadline ZSET
-- KEYS[4]  the channel prefix, redisson_lock__channel:{name}
-- ARGV[1]  owner field
-- ARGV[2]  the wait the owner joined with, in milliseconds (unused: leaving
--          moves no other deadline; kept so the call shape is stable)
-- ARGV[3]  the unlock message ("0")
-- ARGV[4]  the publish command
-- ARGV[5]  now, epoch milliseconds
-- ARGV[6]  the least time the next in line gets to take a free lock (the
--          handoff grace, not the leaver's own wait)
-- ARGV[7]  the most time it gets (the configured fair-lock wait)
--
-- Reply: 1 when the owner was in line and left it, 0 when it was not in line.

local lock, queue, timeouts, channel_prefix = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, wait, message, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local now, grace, cap = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

local head = evict_stale_heads(lock, queue, timeouts, now, owner, cap)
line_expires(queue, timeouts, cap)

if redis.call('zscore', timeouts, owner) == false then
    -- Not in line (a place in the LIST without a deadline is dropped too).
    redis.call('lrem', queue, 1, owner)
    return 0
end

-- Leaving moves nobody else's deadline (fair_common.lua); the next in line, if
-- this was the first, becomes first now.
local was_first = head == owner
redis.call('lrem', queue, 1, owner)
redis.call('zrem', timeouts, owner)
if was_first then
    became_first(queue, timeouts, now, cap)
    -- It left a free lock: the next one must not sleep on.
    if redis.call('exists', lock) == 0 then
        hand_to_head(queue, timeouts, channel_prefix, publish, message, now, grace, cap)
    end
end
return 1
