-- Watchdog for read holds: extend many owners' read holds in one call.
-- (rw_common.lua is prepended.)
--
-- KEYS[i]    lock hash i
-- ARGV[1]    the lease to restart, in milliseconds
-- ARGV[i+1]  the reader owner field renewed on KEYS[i]
--
-- Only that owner's hold keys are extended (never another client's vanished
-- reader), and the hash is kept alive at least as long.
--
-- Reply: one entry per key: 1 renewed, 0 the owner holds no live read there any
--        more (no field, or every one of its hold keys expired).

local lease = ARGV[1]
local renewed = {}
for i, lock in ipairs(KEYS) do
    local owner = ARGV[i + 1]
    local holds = nil
    if redis.call('type', lock).ok == 'hash' then
        holds = tonumber(redis.call('hget', lock, owner))
    end
    -- A hold whose key expired (the owner was cut off past its lease) is gone,
    -- even if its count remains in the hash.
    local alive = 0
    for j = 1, (holds or 0) do
        local key = read_hold_key(lock, owner, j)
        if redis.call('pttl', key) < tonumber(lease) then
            alive = alive + redis.call('pexpire', key, lease)
        elseif redis.call('exists', key) == 1 then
            alive = alive + 1
        end
    end
    if alive > 0 then
        extend(lock, lease)
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
