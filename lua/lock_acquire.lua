-- Reentrant lock: acquire or re-enter.
--
-- KEYS[1]  the lock hash (the user's lock name)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field, "<client-uuid>:<id>"
-- ARGV[3]  "0" to refuse a re-entry (the non-reentrant lock); otherwise allowed
--
-- Reply: nil when the owner now holds the lock (first hold or re-entry);
--        -4 when the owner holds it and re-entry is refused (nothing changed);
--        otherwise the lock's PTTL in milliseconds, which bounds the caller's sleep
--        before its next attempt.

local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
local refuse_reentry = ARGV[3] == '0'

-- Free: the first hold, with exactly this lease.
if redis.call('exists', lock) == 0 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return nil
end

-- Already ours: one more hold. The lease is extended to this one, never shortened,
-- so a short inner lease cannot cut an outer hold.
if redis.call('hexists', lock, owner) == 1 then
    if refuse_reentry then
        return -4
    end
    redis.call('hincrby', lock, owner, 1)
    if redis.call('pttl', lock) < tonumber(lease) then
        redis.call('pexpire', lock, lease)
    end
    return nil
end

-- Held by someone else.
return redis.call('pttl', lock)
