-- Fair semaphore, watchdog: move the lease end of many holds still out, in one
-- call. (fsem_common.lua is prepended.)
--
-- KEYS[2i-1]  hold i's semaphore HASH
-- KEYS[2i]    its leases ZSET
-- ARGV[1]     the renewed lease, ms (from the server's now)
-- ARGV[1+i]   hold i's id
--
-- Reply: one entry per hold: 1 when it is still out (its lease now ends a
-- lease from now or later), 0 when it is gone (released, or its lease ended: a late
-- renewal never revives it; or the keys hold something this crate did not
-- write). One bad key never fails the batch.

local now = now_ms()
local lease_end = now + tonumber(ARGV[1])
local found = {}
for i = 1, #KEYS / 2 do
    local semaphore, leases = KEYS[2 * i - 1], KEYS[2 * i]
    local hold = ARGV[1 + i]
    found[i] = 0
    if not foreign(semaphore) then
        local score = tonumber(redis.call('zscore', leases, hold))
        if score ~= nil and score > now and redis.call('hexists', semaphore, 'hold:' .. hold) == 1 then
            if score < lease_end then
                redis.call('zadd', leases, lease_end, hold)
            end
            found[i] = 1
        end
    end
end
return found
