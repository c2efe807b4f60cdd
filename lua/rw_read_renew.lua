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
-- Reply: one entry per key: 1 renewed, 0 the owner holds no read there any more.

local lease = ARGV[1]
local renewed = {}
for i, lock in ipairs(KEYS) do
    local owner = ARGV[i + 1]
    local holds = nil
    if redis.call('type', lock).ok == 'hash' then
        holds = tonumber(redis.call('hget', lock, owner))
    end
    if holds ~= nil and holds > 0 then
        for j = 1, holds do
            redis.call('pexpire', read_hold_key(lock, owner, j), lease)
        end
        extend(lock, lease)
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
