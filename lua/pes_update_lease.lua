-- Permit-expirable semaphore: give a permit that is still out a new lease.
--
-- KEYS[1]  the semaphore STRING
-- KEYS[2]  the leases ZSET, {name}:timeout
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the permit id (16 raw bytes)
-- ARGV[2]  now, epoch ms
-- ARGV[3]  the instant the new lease ends, epoch ms
-- ARGV[4]  the publish command: "publish" or "spublish"
--
-- Reply: 1 when the lease was changed; 0 when no such permit is out (an expired
-- one is returned to the pool first, so it cannot be revived).

local semaphore, timeouts, channel = KEYS[1], KEYS[2], KEYS[3]
local id, now, expiry, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local refused = foreign(semaphore, timeouts)
if refused then
    return redis.error_reply(refused)
end

reclaim_expired(semaphore, timeouts, channel, now, publish)
if redis.call('zscore', timeouts, id) == false then
    return 0
end
redis.call('zadd', timeouts, expiry, id)
return 1
