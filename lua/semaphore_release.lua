-- Semaphore: give permits back and tell the waiters how many are available.
--
-- KEYS[1]  the semaphore STRING
-- KEYS[2]  its channel, redisson_sc:{name}
-- ARGV[1]  how many permits to give back (> 0)
-- ARGV[2]  the publish command: "publish" or "spublish"
--
-- Reply: the number of permits now available.
--
-- The message is that number (Redisson's waiters wake that many of theirs). None
-- is sent when it is not positive (permits were removed below zero): nobody
-- could take one.

local semaphore, channel = KEYS[1], KEYS[2]
local permits, publish = ARGV[1], ARGV[2]

local available = redis.call('incrby', semaphore, permits)
if available > 0 then
    redis.call(publish, channel, available)
end
return available
