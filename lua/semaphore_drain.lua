-- Semaphore: take every available permit.
--
-- KEYS[1]  the semaphore STRING
--
-- Reply: how many were available before (0 for an absent key, which stays
-- absent; negative when permits had been removed below zero: the count is then
-- set to 0 all the same, as Redisson does).

local semaphore = KEYS[1]

local available, foreign = permit_count(semaphore)
if available == false then
    return redis.error_reply(foreign)
end
if available == nil then
    return 0
end
redis.call('set', semaphore, 0)
return available
