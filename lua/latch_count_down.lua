-- Count-down latch: count one down; at zero the latch opens (its key is deleted)
-- and every waiter is told.
--
-- KEYS[1]  the latch STRING
-- KEYS[2]  its channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the zero message ("0")
-- ARGV[2]  the publish command: "publish" or "spublish"
--
-- Reply: the count still to go (0: open; an open latch stays open, unchanged).

local latch, channel = KEYS[1], KEYS[2]
local message, publish = ARGV[1], ARGV[2]

if redis.call('exists', latch) == 0 then
    return 0
end
local count = redis.call('decr', latch)
if count > 0 then
    return count
end
redis.call('del', latch)
redis.call(publish, channel, message)
return 0
