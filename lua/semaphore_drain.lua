-- Semaphore: take every available permit.
--
-- KEYS[1]  the semaphore STRING
--
-- Reply: how many were available before (0 for an absent key, which stays
-- absent; negative when permits had been removed below zero: the count is then
-- set to 0 all the same, as Redisson does).

local semaphore = KEYS[1]

local available = redis.call('get', semaphore)
if available == false then
    return 0
end
redis.call('set', semaphore, 0)
return tonumber(available)
