-- Fair semaphore: give back the permits held under one id, and call the first
-- in line. (fsem_common.lua is prepended.)
--
-- KEYS[1..4] as fsem_acquire.lua
-- ARGV[1]  the hold id
-- ARGV[2]  the publish command
-- ARGV[3]  the waiters' channel prefix
--
-- Reply: 1 when the hold was out and its permits are back; 0 when it was not
-- (never taken, released already, or its lease ended: its permits are back
-- all the same).

local semaphore, leases, queue, timeouts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold, publish, channel_prefix = ARGV[1], ARGV[2], ARGV[3]
local refused = foreign(semaphore, leases, queue, timeouts)
if refused then
    return redis.error_reply(refused)
end
local now = now_ms()

reclaim(semaphore, leases, now)
local n = tonumber(redis.call('hget', semaphore, 'hold:' .. hold))
if n ~= nil then
    redis.call('hdel', semaphore, 'hold:' .. hold)
    redis.call('zrem', leases, hold)
    redis.call('hincrby', semaphore, 'permits', n)
end
call_head(semaphore, queue, timeouts, now, publish, channel_prefix)
if n == nil then
    return 0
end
return 1
