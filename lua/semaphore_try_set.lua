-- Semaphore (either kind): set the number of permits, only if it was never set.
--
-- KEYS[1]  the semaphore STRING
-- KEYS[2]  its channel, redisson_sc:{name}
-- ARGV[1]  the number of permits
-- ARGV[2]  the publish command: "publish" or "spublish"
--
-- Reply: 1 when set (and the number published); 0 when the key existed.

local semaphore, channel = KEYS[1], KEYS[2]
local permits, publish = ARGV[1], ARGV[2]

if redis.call('exists', semaphore) == 1 then
    return 0
end
redis.call('set', semaphore, permits)
if tonumber(permits) > 0 then
    redis.call(publish, channel, permits)
end
return 1
