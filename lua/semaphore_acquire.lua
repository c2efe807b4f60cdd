-- Semaphore: take permits if that many are available, leaving a mark of this
-- attempt that a settle can read if its reply never reaches the client.
--
-- KEYS[1]  the semaphore: a STRING, the number of permits available (absent: none)
-- KEYS[2]  this attempt's mark, {name}:rl-acquired:<attempt id> (Redisson
--          neither reads nor writes it)
-- KEYS[3..] marks of earlier attempts of this client whose replies came: deleted
-- ARGV[1]  how many permits to take (> 0)
-- ARGV[2]  how long the mark lives, ms: longer than a settle can take
--
-- Reply: 1 when they were taken (the mark holds how many); 0 (nothing changed
-- but the forgotten marks) when fewer are available.
--
-- Redisson's layout gives a permit no owner: without the mark, an attempt whose
-- reply was lost (a cut connection, a timeout) may have taken permits that
-- nobody holds, for good. The settle script gives them back only if the mark
-- is there, and deletes it in the same step, so it never gives back twice.

local semaphore, mark = KEYS[1], KEYS[2]
local wanted, mark_ttl = tonumber(ARGV[1]), ARGV[2]

local available, foreign = permit_count(semaphore)
if available == false then
    return redis.error_reply(foreign)
end
if #KEYS > 2 then
    redis.call('del', unpack(KEYS, 3))
end
if available == nil or available < wanted then
    return 0
end
redis.call('decrby', semaphore, wanted)
redis.call('set', mark, wanted, 'px', mark_ttl)
return 1
