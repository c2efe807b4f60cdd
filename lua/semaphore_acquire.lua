-- Semaphore: take permits if that many are available.
--
-- KEYS[1]  the semaphore: a STRING, the number of permits available (absent: none)
-- ARGV[1]  how many permits to take (> 0)
--
-- Reply: 1 when they were taken; 0 (nothing changed) when fewer are available.

local semaphore = KEYS[1]
local wanted = tonumber(ARGV[1])

local available, foreign = permit_count(semaphore)
if available == false then
    return redis.error_reply(foreign)
end
if available == nil or available < wanted then
    return 0
end
redis.call('decrby', semaphore, wanted)
return 1
