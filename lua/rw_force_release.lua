-- Read-write lock: release every hold of one side, whoever owns it.
-- (rw_common.lua is prepended.)
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the channel, redisson_rwlock:{name}
-- ARGV[1]  the mode to release: "read" or "write"
-- ARGV[2]  the message ("1": every waiter may proceed)
-- ARGV[3]  the publish command
-- ARGV[4]  the unlock message ("0"), published after ARGV[2] so a Redisson waiter
--          between its attempt and its sleep keeps a wake-up (see rw_write_release)
--
-- Reply: 1 when the lock was in that mode and is now deleted, 0 otherwise.

local lock, channel = KEYS[1], KEYS[2]
local side, message, publish, kept = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

if redis.call('hget', lock, 'mode') ~= side then
    return 0
end
-- Read holds' own keys go too, so nothing is left behind.
for _, field in ipairs(redis.call('hkeys', lock)) do
    if field ~= 'mode' and not is_writer_field(field) then
        local holds = tonumber(redis.call('hget', lock, field)) or 0
        for i = 1, holds do
            redis.call('del', read_hold_key(lock, field, i))
        end
    end
end
redis.call('del', lock)
redis.call(publish, channel, message)
redis.call(publish, channel, kept)
return 1
