-- Reentrant lock: acquire or re-enter. (order_common.lua is prepended.)
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  (optional) a first attempt's or single try's: the turn,
--          {name}:rl-turn, the client the last release named for a short while
--          (see lock_release.lua); or a waiter's: the order of waiting clients,
--          {name}:rl-waiters, a ZSET of client id -> arrival (microseconds)
-- KEYS[3]  (a waiter's, with the order) the turn
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field, "<client-uuid>:<id>"
-- ARGV[3]  "0" to refuse a re-entry (the non-reentrant lock); otherwise allowed
-- ARGV[4]  (a waiter's) how long the order lives untouched, in milliseconds
-- ARGV[5]  (a waiter's) "1" when an earlier attempt of its wait joined the order
--          (taking the lock leaves it), else "0"
--
-- Reply: nil when the owner now holds the lock (first hold or re-entry);
--        -4 when the owner holds it and re-entry is refused (nothing changed);
--        otherwise busy: the lock's PTTL in milliseconds (or what is left of
--        another client's turn), which bounds the caller's sleep before its next
--        attempt; a waiter's is {that bound, how many clients wait ahead of its
--        own in the order}.
--
-- The order and the turn are this crate's alone, a hint among its clients,
-- never a gate for Redisson's: its scripts ignore them. A release pops the
-- first client of the order and names it in the turn; until the turn ends,
-- only that client's attempts take the free lock, so a release's one message is
-- answered by one attempt, not one per waiting client. Only a lock contended
-- across clients lately gets the turn with a first attempt (one GET more than
-- Redisson's script); otherwise KEYS[1] alone is sent, and this is Redisson's.

local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
local refuse_reentry = ARGV[3] == '0'
local waiter = KEYS[3] ~= nil
local order, turn = nil, KEYS[2]
if waiter then
    order, turn = KEYS[2], KEYS[3]
end
local keep, joined = ARGV[4], ARGV[5] == '1'
local client = string.match(owner, '^[^:]*')

-- Free: the first hold, with exactly this lease, unless another client's turn
-- keeps it a while.
if redis.call('exists', lock) == 0 then
    local kept = order_turn_keeps(order, turn, client, joined)
    if kept then
        return order_busy(order, turn, client, keep, kept)
    end
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
return order_busy(order, turn, client, keep, redis.call('pttl', lock))
