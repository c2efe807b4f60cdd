-- Permit-expirable semaphore: how many permits are available, once every permit
-- whose lease ended is back in the pool.
--
-- KEYS[1]  the semaphore STRING
-- KEYS[2]  the leases ZSET, {name}:timeout
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  now, epoch ms
-- ARGV[2]  the publish command: "publish" or "spublish"
--
-- Reply: the number of permits available (0 for an absent key).

local semaphore, timeouts, channel = KEYS[1], KEYS[2], KEYS[3]
local now, publish = tonumber(ARGV[1]), ARGV[2]
local refused = foreign(semaphore, timeouts)
if refused then
    return redis.error_reply(refused)
end

reclaim_expired(semaphore, timeouts, channel, now, publish)
return tonumber(redis.call('get', semaphore)) or 0
