-- Reentrant or write lock: a waiter gave up; its client leaves the order of
-- waiting clients (see order_common.lua).
--
-- KEYS[1]  the order, {name}:rl-waiters
-- KEYS[2]  the lock's channel: redisson_lock__channel:{name}, or the read-write
--          lock's redisson_rwlock:{name}
-- ARGV[1]  the client id
-- ARGV[2]  the publish command: "publish" or "spublish"
-- ARGV[3]  the unlock message ("0")
--
-- Every waiter behind counts one message per client that leaves the order
-- ahead of it (a release pops one and publishes one): a client taken out with
-- no message would leave their counts one too high, each sleeping past its
-- turn, and the first of them past a free lock. So its leaving publishes the
-- unlock message too; a Redisson waiter it reaches tries once more, as after
-- any message.
--
-- Reply: 1 when the client was in the order, else 0.

local order, channel = KEYS[1], KEYS[2]
local client, publish, message = ARGV[1], ARGV[2], ARGV[3]
if redis.call('zrem', order, client) == 0 then
    return 0
end
redis.call(publish, channel, message)
return 1
