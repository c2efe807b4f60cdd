-- Semaphore (either kind): add permits (a negative number removes them; the
-- count may go below zero, and then acquires wait until releases lift it).
--
-- KEYS[1]  the semaphore STRING (absent counts as 0)
-- KEYS[2]  its channel, redisson_sc:{name}
-- ARGV[1]  the change, a signed integer
-- ARGV[2]  the publish command: "publish" or "spublish"
--
-- Reply: the number of permits now available; published when positive.

local semaphore, channel = KEYS[1], KEYS[2]
local change, publish = ARGV[1], ARGV[2]

local available = redis.call('incrby', semaphore, change)
if available > 0 then
    redis.call(publish, channel, available)
end
return available
