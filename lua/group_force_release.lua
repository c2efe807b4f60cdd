-- Group multi-lock: release these members whoever holds them.
--
-- KEYS[1]    the group hash
-- KEYS[2]    the unlock channel
-- ARGV[1]    the unlock message ("0")
-- ARGV[2]    the publish command
-- ARGV[3..]  member ids
--
-- Reply: 1 when some member was held (and no longer is), 0 otherwise.

local group, channel = KEYS[1], KEYS[2]
local message, publish = ARGV[1], ARGV[2]
local now = now_ms()
local removed = 0
for i = 3, #ARGV do
    local id = ARGV[i]
    local holder = redis.call('hget', group, id)
    if holder then
        if hold_end(group, id, holder, now) ~= nil then
            removed = 1
        end
        redis.call('hdel', group, id, expire_field(id, holder), count_field(id, holder))
    end
end
redis.call(publish, channel, message)
return removed
