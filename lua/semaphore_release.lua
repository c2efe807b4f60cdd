-- Semaphore: give permits back and tell the waiters how many are available,
-- once per release however often it is sent.
--
-- KEYS[1]  the semaphore STRING
-- KEYS[2]  its channel, redisson_sc:{name}
-- KEYS[3]  this release's receipt, {name}:rl-released:<release id> (Redisson
--          neither reads nor writes it)
-- KEYS[4..] marks and receipts of earlier calls of this handle whose replies
--          came: deleted
-- ARGV[1]  how many permits to give back (> 0)
-- ARGV[2]  the publish command: "publish" or "spublish"
-- ARGV[3]  how long the receipt lives, ms: longer than a settle can take
--
-- Reply: the number of permits now available.
--
-- Redisson's layout gives a permit no owner, so a release cannot be told from
-- another: one whose reply was lost could not be sent again, lest it give
-- back two, and its permit might be gone for good. The receipt tells them
-- apart: a release sent again finds its receipt and changes nothing.
--
-- The message is that number (Redisson's waiters wake that many of theirs). None
-- is sent when it is not positive (permits were removed below zero): nobody
-- could take one.

local semaphore, channel, receipt = KEYS[1], KEYS[2], KEYS[3]
local permits, publish, receipt_ttl = ARGV[1], ARGV[2], ARGV[3]

if #KEYS > 3 then
    redis.call('del', unpack(KEYS, 4))
end
if redis.call('exists', receipt) == 1 then
    return tonumber(redis.call('get', semaphore) or 0)
end
-- INCRBY first: on a semaphore someone overwrote with a non-number it fails
-- before the receipt is written.
local available = redis.call('incrby', semaphore, permits)
redis.call('set', receipt, permits, 'px', receipt_ttl)
if available > 0 then
    redis.call(publish, channel, available)
end
return available
