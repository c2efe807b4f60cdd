-- Count-down latch: delete it (it opens), telling the waiters.
--
-- KEYS[1]  the latch STRING
-- KEYS[2]  its channel, redisson_countdownlatch__channel__{name}
-- ARGV[1]  the zero message ("0"). Redisson's own delete sends "1" (new count),
--          which its waiters take as "keep waiting": a Java await() on a deleted
--          latch then sleeps on (observed with 3.52.0). "0" wakes them, and each
--          finds the latch open.
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
