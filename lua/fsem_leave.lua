-- Fair semaphore: a waiter leaves the line (it gave up, or its future was
-- dropped), giving back any grant made to it meanwhile. (fsem_common.lua is
-- prepended.)
--
-- KEYS[1..4] as fsem_acquire.lua
-- ARGV[1]  the waiter id
-- ARGV[2]  the publish command
-- ARGV[3]  the waiters' channel prefix
--
-- Reply: 1 when it had a place or a grant; 0 when it had neither.

local semaphore, leases, queue, timeouts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local waiter, publish, channel_prefix = ARGV[1], ARGV[2], ARGV[3]
local refused = foreign(semaphore)
if refused then
    return redis.error_reply(refused)
end
local now = now_ms()

reclaim(semaphore, leases, now)
reap(semaphore, timeouts, now)
local had_place = leave(semaphore, queue, waiter)
local had_grant = give_back(semaphore, leases, waiter) ~= nil
call_head(semaphore, queue, timeouts, now, publish, channel_prefix)
if had_place or had_grant then
    return 1
end
return 0
