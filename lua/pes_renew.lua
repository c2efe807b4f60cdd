-- Watchdog: move the lease end of many permits still out, in one call (the
-- batch counterpart of pes_update_lease.lua, which Redisson calls
-- updateLeaseTime). semaphore_count.lua and pes_common.lua are prepended.
--
-- KEYS[3i-2]  permit i's semaphore STRING
-- KEYS[3i-1]  its leases ZSET, {name}:timeout
-- KEYS[3i]    its channel, redisson_sc:{name}
-- ARGV[1]     now, epoch ms
-- ARGV[2]     the instant the renewed leases end, epoch ms
-- ARGV[3]     the publish command: "publish" or "spublish"
-- ARGV[3+i]   permit i's id (16 raw bytes)
--
-- Reply: an array with one entry per permit: 1 when it is still out and its
-- lease now ends at ARGV[2] or later (a longer lease, set by updateLeaseTime,
-- is kept), 0 when it is gone (released, or its lease ended: expired permits
-- are reclaimed first, so a late renewal never revives one; or the keys hold
-- something this crate did not write). One bad key never fails the batch.

local now, expiry, publish = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local found = {}
for i = 1, #KEYS / 3 do
    local semaphore, timeouts, channel = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
    local id = ARGV[3 + i]
    found[i] = 0
    if not foreign(semaphore, timeouts) then
        reclaim_expired(semaphore, timeouts, channel, now, publish)
        local score = redis.call('zscore', timeouts, id)
        if score ~= false then
            if tonumber(score) < tonumber(expiry) then
                redis.call('zadd', timeouts, expiry, id)
            end
            found[i] = 1
        end
    end
end
return found
