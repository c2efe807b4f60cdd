-- Read-write lock: take a read hold. (rw_common.lua is prepended.)
--
-- KEYS[1]  the lock hash
-- ARGV[1]  lease in milliseconds (of this hold's own key)
-- ARGV[2]  owner field
--
-- Reply: nil when the owner now holds one more read hold; otherwise the lock's PTTL
--        (a writer holds it).

local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
local mode = redis.call('hget', lock, 'mode')

-- Free: the first reader.
if mode == false then
    redis.call('hset', lock, 'mode', 'read', owner, 1)
    redis.call('set', read_hold_key(lock, owner, 1), 1, 'px', lease)
    redis.call('pexpire', lock, lease)
    return nil
end

-- Readers share; a writer may also read (the first step of a downgrade).
if mode == 'read' or redis.call('hexists', lock, owner .. ':write') == 1 then
    local holds = redis.call('hincrby', lock, owner, 1)
    redis.call('set', read_hold_key(lock, owner, holds), 1, 'px', lease)
    extend(lock, lease)
    return nil
end

return redis.call('pttl', lock)
