-- Fenced lock: acquire or re-enter, and draw a fencing token.
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  the token counter, redisson_lock_token:{name} (a STRING, no TTL)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field, "<client-uuid>:<id>"
--
-- Reply: {token} when the owner now holds the lock (first hold or re-entry): the
--        counter's new value, greater than every token drawn before for this name;
--        otherwise the lock's PTTL in milliseconds, which bounds the caller's sleep.

local lock, counter = KEYS[1], KEYS[2]
local lease, owner = ARGV[1], ARGV[2]

-- Free: the first hold, with exactly this lease.
if redis.call('exists', lock) == 0 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return {redis.call('incr', counter)}
end

-- Already ours: one more hold (and a token of its own); the lease is extended,
-- never shortened.
if redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    if redis.call('pttl', lock) < tonumber(lease) then
        redis.call('pexpire', lock, lease)
    end
    return {redis.call('incr', counter)}
end

-- Held by someone else.
return redis.call('pttl', lock)
