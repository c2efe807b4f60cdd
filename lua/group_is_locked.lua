-- Group multi-lock: is any of these members held (by anyone)?
--
-- KEYS[1]    the group hash
-- ARGV[1..]  member ids
--
-- Reply: 1 or 0.

local group = KEYS[1]
local now = now_ms()
for i = 1, #ARGV do
    local holder = redis.call('hget', group, ARGV[i])
    if holder and hold_end(group, ARGV[i], holder, now) ~= nil then
        return 1
    end
end
return 0
