-- Permit-expirable semaphore: take permits, each with its own id and lease.
--
-- KEYS[1]  the semaphore STRING (absent: no permits)
-- KEYS[2]  the leases ZSET, {name}:timeout
-- KEYS[3]  the channel, redisson_sc:{name}
-- ARGV[1]  now, epoch ms
-- ARGV[2]  the instant the leases end, epoch ms
-- ARGV[3]  the publish command: "publish" or "spublish"
-- ARGV[4..] the new permits' ids (16 raw bytes each), one per permit wanted
--
-- Reply: 0 when the permits were taken; otherwise (nothing taken) the ms until
-- the first lease ends, when a permit will come back without a release, or -1
-- when no lease will end by itself.

local semaphore, timeouts, channel = KEYS[1], KEYS[2], KEYS[3]
local now, expiry, publish = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local refused = foreign(semaphore, timeouts)
if refused then
    return redis.error_reply(refused)
end
local wanted = #ARGV - 3

reclaim_expired(semaphore, timeouts, channel, now, publish)

local available = tonumber(redis.call('get', semaphore))
if available ~= nil and available >= wanted then
    redis.call('decrby', semaphore, wanted)
    for i = 4, #ARGV do
        redis.call('zadd', timeouts, expiry, ARGV[i])
    end
    -- A semaphore given a TTL takes its leases with it (as Redisson does).
    local ttl = redis.call('pttl', semaphore)
    if ttl > 0 then
        redis.call('pexpire', timeouts, ttl)
    end
    return 0
end

local first = redis.call('zrange', timeouts, 0, 0, 'WITHSCORES')
if first[2] == nil or tonumber(first[2]) >= NEVER then
    return -1
end
return math.max(tonumber(first[2]) - now, 1)
