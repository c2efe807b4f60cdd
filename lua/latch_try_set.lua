-- Count-down latch: set the count, only if the latch is not counting already.
--
-- KEYS[1]  the latch: a STRING, the count still to go (absent: open)
-- KEYS[2]  its channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the count (> 0)
-- ARGV[2]  the new-count message ("1")
-- ARGV[3]  the publish command: "publish" or "spublish"
--
-- Reply: 1 when set (and announced); 0 when the latch was counting.

local latch, channel = KEYS[1], KEYS[2]
local count, message, publish = ARGV[1], ARGV[2], ARGV[3]

if redis.call('exists', latch) == 1 then
    return 0
end
redis.call('set', latch, count)
redis.call(publish, channel, message)
return 1
