-- Semaphore: settle an attempt whose outcome the client does not know (its
-- reply was lost, or its caller went away): give back the permits it took, if
-- it took any, exactly once.
--
-- KEYS[1]  the semaphore STRING
-- KEYS[2]  its channel, redisson_sc:{name}
-- KEYS[3]  the attempt's mark (see semaphore_acquire.lua)
-- ARGV[1]  the publish command: "publish" or "spublish"
--
-- Reply: the number of permits given back (0: the attempt took none, or was
-- settled already).

local semaphore, channel, mark = KEYS[1], KEYS[2], KEYS[3]
local publish = ARGV[1]

local taken = redis.call('get', mark)
if taken == false then
    return 0
end
-- INCRBY first: on a semaphore someone overwrote with a non-number it fails
-- before anything is written, and the mark stays for a later settle.
local available = redis.call('incrby', semaphore, taken)
redis.call('del', mark)
if available > 0 then
    redis.call(publish, channel, available)
end
return tonumber(taken)
