-- Permit-expirable semaphore: give one permit back by its id.
--
-- KEYS[1]  the semaphore STRING
-- KEYS[2]  the leases ZSET, {name}:timeout
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  the permit id (16 raw bytes)
-- ARGV[2]  now, epoch ms
-- ARGV[3]  the publish command: "publish" or "spublish"
--
-- Reply: 1 when the permit was held and is back in the pool; 0 when no such
-- permit is out (never issued, released already, or its lease ended: then it
-- is back in the pool, as after a release, but the release is refused).

local semaphore, timeouts, channel = KEYS[1], KEYS[2], KEYS[3]
local id, now, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local refused = foreign(semaphore, timeouts)
if refused then
    return redis.error_reply(refused)
end

local expiry = tonumber(redis.call('zscore', timeouts, id))
if expiry == nil then
    return 0
end
redis.call('zrem', timeouts, id)
local available = redis.call('incrby', semaphore, 1)
if available > 0 then
    redis.call(publish, channel, available)
end
if expiry <= now then
    return 0
end
return 1
