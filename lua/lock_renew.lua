-- Watchdog: extend many holds in one call.
--
-- KEYS[i]    lock hash i
-- ARGV[1]    the lease to extend to, in milliseconds (a longer TTL is kept)
-- ARGV[i+1]  the owner field whose hold on KEYS[i] is renewed
--
-- Reply: an array with one entry per key: 1 when the owner still held it and the
--        lease was restarted, 0 when the hold is gone (expired, released elsewhere,
--        force-unlocked, or the key now holds another type) and must no longer be
--        renewed. One bad key never fails the batch.

local lease = ARGV[1]
local renewed = {}
for i, lock in ipairs(KEYS) do
    if redis.call('type', lock).ok == 'hash' and redis.call('hexists', lock, ARGV[i + 1]) == 1 then
        -- Extend, never shorten: another hold of the owner may have a longer lease.
        if redis.call('pttl', lock) < tonumber(lease) then
            redis.call('pexpire', lock, lease)
        end
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
