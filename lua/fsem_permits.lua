-- Fair semaphore: read or change the permits. (fsem_common.lua is prepended.)
--
-- KEYS[1..4] as fsem_acquire.lua
-- ARGV[1]  what: "available" (read), "try_set" (set to ARGV[2] if never set),
--          "add" (add ARGV[2], negative to remove), "drain" (take every
--          available permit for good)
-- ARGV[2]  the number, for "try_set" and "add"
-- ARGV[3]  the publish command
-- ARGV[4]  the waiters' channel prefix
--
-- Every one first gives back the permits of holds whose lease ended, and
-- calls the first in line when what it asks for is available afterwards.
-- Reply: "available": the permits available; "try_set": 1 when set, 0 when
-- the semaphore was set before; "add": the permits available after;
-- "drain": the permits taken.

local semaphore, leases, queue, timeouts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local what, number = ARGV[1], tonumber(ARGV[2])
local publish, channel_prefix = ARGV[3], ARGV[4]
local refused = foreign(semaphore)
if refused then
    return redis.error_reply(refused)
end
local now = now_ms()

reclaim(semaphore, leases, now)
reap(semaphore, timeouts, now)
local reply
if what == 'available' then
    reply = available(semaphore)
elseif what == 'try_set' then
    reply = redis.call('hsetnx', semaphore, 'permits', number)
elseif what == 'add' then
    reply = redis.call('hincrby', semaphore, 'permits', number)
elseif what == 'drain' then
    reply = math.max(available(semaphore), 0)
    redis.call('hincrby', semaphore, 'permits', -reply)
else
    return redis.error_reply('ERR unknown fair semaphore operation ' .. tostring(what))
end
call_head(semaphore, queue, timeouts, now, publish, channel_prefix)
return reply
