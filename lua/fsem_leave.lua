-- Fair semaphore: a waiter leaves the line without its permits (it gave up,
-- timed out, or was dropped); the first in line is called if it was first.
-- (fsem_common.lua is prepended.)
--
-- KEYS[1..4] as fsem_acquire.lua
-- ARGV[1]  the waiter id
-- ARGV[2]  now, epoch ms
-- ARGV[3]  the publish command
-- ARGV[4]  the waiters' channel prefix
--
-- Reply: 1 when it had a place, 0 when not.

local semaphore, leases, queue, timeouts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local waiter, now, publish, channel_prefix = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local refused = foreign(semaphore, leases, queue, timeouts)
if refused then
    return redis.error_reply(refused)
end

local was_first = redis.call('lindex', queue, 0) == waiter
local had_place = redis.call('zscore', timeouts, waiter) ~= false
leave(semaphore, queue, timeouts, waiter)
if was_first then
    call_head(semaphore, queue, timeouts, now, publish, channel_prefix)
end
if had_place then
    return 1
end
return 0
