-- Read-write lock: release one write hold. (rw_common.lua and order_common.lua
-- are prepended.)
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- ARGV[1]  the read-unlock message ("1": wakes every waiter)
-- ARGV[2]  lease in milliseconds: the remaining holds live at least this long
-- ARGV[3]  owner field
-- ARGV[4]  the publish command
-- ARGV[5]  the unlock message ("0"), published after ARGV[1]
-- KEYS[3]  (optional) the order of waiting clients, {name}:rl-waiters (see
--          order_common.lua)
-- KEYS[4]  (with KEYS[3]) the turn, {name}:rl-turn
-- ARGV[6]  (with KEYS[3]) how long the turn lasts, in milliseconds
--
-- Both messages go out whenever waiters may proceed: "1" wakes every waiter that
-- is asleep right now; "0" also leaves a Redisson (Java) waiter a wake-up it keeps
-- (a permit), so one that is between its failed attempt and its sleep does not
-- sleep out a whole lease.
--
-- Reply: nil when the owner holds no write hold; 0 when write holds remain, or the
--        owner's read holds keep the lock (now in read mode); 1 + the number of
--        clients the unlock message reached when it is free (as lock_release's:
--        more than 1 tells the releasing client that a waiter was woken).

local lock, channel, order, turn = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local message, lease, owner, publish = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local kept, turn_ms = ARGV[5], ARGV[6]
local writer = owner .. ':write'

if redis.call('hget', lock, 'mode') ~= 'write' or redis.call('hexists', lock, writer) == 0 then
    return nil
end

if redis.call('hincrby', lock, writer, -1) > 0 then
    extend(lock, lease)
    return 0
end

redis.call('hdel', lock, writer)
if redis.call('hlen', lock) == 1 then
    redis.call('del', lock)
    redis.call(publish, channel, message)
    -- If the message reached anyone, the first client in the order takes
    -- its turn (see order_common.lua).
    local woken = redis.call(publish, channel, kept)
    order_name_next(order, turn, turn_ms, woken)
    return 1 + woken
end

-- The owner still holds reads: the downgrade is complete. Waiting readers may
-- join now, so wake them all.
redis.call('hset', lock, 'mode', 'read')
local longest = longest_read_hold(lock)
if longest > 0 then
    extend(lock, longest)
end
redis.call(publish, channel, message)
redis.call(publish, channel, kept)
return 0
