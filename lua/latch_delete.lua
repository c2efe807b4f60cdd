-- Count-down latch: delete it (it opens), telling the waiters.
--
-- KEYS[1]  the latch STRING
-- KEYS[2]  its channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the new-count message ("1", as Redisson sends)
-- ARGV[2]  the publish command: "publish" or "spublish"
--
-- Reply: 1 when it existed; 0 when it was open already.

local latch, channel = KEYS[1], KEYS[2]
local message, publish = ARGV[1], ARGV[2]

if redis.call('del', latch) == 0 then
    return 0
end
redis.call(publish, channel, message)
return 1
