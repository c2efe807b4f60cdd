-- Read-write lock: take a write hold. (rw_common.lua and order_common.lua are
-- prepended.)
--
-- KEYS[1]  the lock hash
-- KEYS[2]  (optional) a first attempt's or single try's: the turn,
--          {name}:rl-turn (see order_common.lua); or a waiter's: the order of
--          waiting clients, {name}:rl-waiters
-- KEYS[3]  (a waiter's, with the order) the turn
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
-- ARGV[3]  "1" to refuse (reply -3) when the owner holds a read hold: upgrading
--          is not supported, so waiting for the write would wait on itself
-- ARGV[4]  (a waiter's) how long the order lives untouched, in milliseconds
-- ARGV[5]  (a waiter's) "1" when an earlier attempt of its wait joined the order
--
-- Reply: nil when the owner now holds one more write hold; -3 (only with ARGV[3])
--        when the owner holds a read; otherwise busy: the lock's PTTL (or what
--        is left of another client's turn); a waiter's is {that bound, how many
--        clients wait ahead of its own in the order}.
--
-- The write waiters of this crate's clients take turns as the reentrant
-- lock's do (lock_acquire.lua): a release's message is answered by one
-- client's attempt, not one per waiting client. Readers keep no order: a
-- reader may take the lock during a writer's turn, and the writer named stays
-- first.

local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
local order, turn = nil, KEYS[2]
if KEYS[3] ~= nil then
    order, turn = KEYS[2], KEYS[3]
end
local keep, joined = ARGV[4], ARGV[5] == '1'
local client = string.match(owner, '^[^:]*')
local writer = owner .. ':write'
local mode = redis.call('hget', lock, 'mode')

if mode == false then
    local kept = order_turn_keeps(order, turn, client, joined)
    if kept then
        return order_busy(order, turn, client, keep, kept)
    end
    redis.call('hset', lock, 'mode', 'write', writer, 1)
    redis.call('pexpire', lock, lease)
    return nil
end

-- Ours already: re-enter, extending the lease (never shortening it).
if mode == 'write' and redis.call('hexists', lock, writer) == 1 then
    redis.call('hincrby', lock, writer, 1)
    extend(lock, lease)
    return nil
end

if ARGV[3] == '1' and mode == 'read' and redis.call('hexists', lock, owner) == 1 then
    return -3
end
return order_busy(order, turn, client, keep, redis.call('pttl', lock))
