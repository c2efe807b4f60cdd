-- Read-write lock: take a write hold. (rw_common.lua is prepended.)
--
-- KEYS[1]  the lock hash
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
-- ARGV[3]  "1" to refuse (reply -3) when the owner holds a read hold: upgrading
--          is not supported, so waiting for the write would wait on itself
--
-- Reply: nil when the owner now holds one more write hold; -3 (only with ARGV[3])
--        when the owner holds a read; otherwise the lock's PTTL.

local lock, lease, owner = KEYS[1], ARGV[1], ARGV[2]
local writer = owner .. ':write'
local mode = redis.call('hget', lock, 'mode')

if mode == false then
    redis.call('hset', lock, 'mode', 'write', writer, 1)
    redis.call('pexpire', lock, lease)
    return nil
end

-- Ours already: re-enter, extending the lease (never shortening it).
if mode == 'write' and redis.call('hexists', lock, writer) == 1 then
    redis.call('hincrby', lock, writer, 1)
    extend(lock, lease)
    return nil
end

if ARGV[3] == '1' and mode == 'read' and redis.call('hexists', lock, owner) == 1 then
    return -3
end
return redis.call('pttl', lock)
