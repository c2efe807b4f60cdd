-- Reentrant lock: release one hold.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the unlock channel, redisson_lock__channel:{name}
-- ARGV[1]  the unlock message ("0")
-- ARGV[2]  lease in milliseconds: the remaining holds live at least this long
--          (an inner short lease never shortens an outer hold)
-- ARGV[3]  owner field
-- ARGV[4]  the publish command: "publish" or "spublish"; empty for none (the spin
--          lock, whose waiters poll and which must work without channel access)
--
-- Reply: nil when the owner holds no hold (never held, expired, or someone else's);
--        0 when holds remain; when this was the last hold and the lock is free,
--        1 + the number of subscribers the unlock message reached.

local lock, channel = KEYS[1], KEYS[2]
local message, lease, owner, publish = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

if redis.call('hexists', lock, owner) == 0 then
    return nil
end

local remaining = redis.call('hincrby', lock, owner, -1)
if remaining > 0 then
    if redis.call('pttl', lock) < tonumber(lease) then
        redis.call('pexpire', lock, lease)
    end
    return 0
end

-- Last hold gone: free the lock and wake one waiter.
redis.call('del', lock)
local woken = 0
if publish ~= '' then
    woken = redis.call(publish, channel, message)
end
return 1 + woken
