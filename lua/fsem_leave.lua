-- Fair semaphore: a waiter leaves the line without its permits (it gave up,
-- timed out, or was dropped); the first in line is called when it can be
-- served.
-- (fsem_common.lua is prepended.)
--
-- KEYS[1..4] as fsem_acquire.lua
-- ARGV[1]  the waiter id
-- ARGV[2]  the publish command
-- ARGV[3]  the waiters' channel prefix
--
-- Reply: 1 when it had a place, 0 when not.

local semaphore, leases, queue, timeouts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local waiter, publish, channel_prefix = ARGV[1], ARGV[2], ARGV[3]
local refused = foreign(semaphore, leases, queue, timeouts)
if refused then
    return redis.error_reply(refused)
end
local now = now_ms()

reclaim(semaphore, leases, now)
local had_place = redis.call('zscore', timeouts, waiter) ~= false
leave(semaphore, queue, timeouts, waiter)
-- Whoever is first now (its leaving, an ended lease, a vanished head
-- removed) may be served.
call_head(semaphore, queue, timeouts, now, publish, channel_prefix)
if had_place then
    return 1
end
return 0
