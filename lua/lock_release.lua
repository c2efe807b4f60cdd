-- Reentrant lock: release one hold. (order_common.lua is prepended.)
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the unlock channel, redisson_lock__channel:{name}
-- ARGV[1]  the unlock message ("0")
-- ARGV[2]  lease in milliseconds: the remaining holds live at least this long
--          (an inner short lease never shortens an outer hold)
-- ARGV[3]  owner field
-- ARGV[4]  the publish command: "publish" or "spublish"; empty for none (the spin
--          lock, whose waiters poll and which must work without channel access)
-- KEYS[3]  (optional) the order of waiting clients, {name}:rl-waiters (see
--          lock_acquire.lua)
-- KEYS[4]  (with KEYS[3]) the turn, {name}:rl-turn
-- ARGV[5]  (with KEYS[3]) how long the turn lasts, in milliseconds
--
-- Reply: nil when the owner holds no hold (never held, expired, or someone else's);
--        0 when holds remain; when this was the last hold and the lock is free,
--        1 + the number of subscribers the unlock message reached.

local lock, channel, order, turn = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, lease, owner, publish, turn_ms = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]

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

-- Last hold gone: free the lock and wake one waiter; if the message reached
-- anyone, the first client in the order is named for the turn.
redis.call('del', lock)
local woken = 0
if publish ~= '' then
    woken = redis.call(publish, channel, message)
end
order_name_next(order, turn, turn_ms, woken)
return 1 + woken
