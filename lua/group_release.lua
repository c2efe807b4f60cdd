-- Group multi-lock: release one hold of every member.
--
-- KEYS[1]    the group hash
-- KEYS[2]    the unlock channel, redisson_lock__channel:{group}
-- ARGV[1]    the unlock message ("0")
-- ARGV[2]    lease in milliseconds: remaining holds live at least this long
-- ARGV[3]    owner
-- ARGV[4]    the publish command ("publish" or "spublish")
-- ARGV[5..]  member ids
--
-- Reply: nil when the owner does not hold every member (never held, ended, or
--        taken over); 0 when holds remain; 1 when that was the last hold.

local group, channel = KEYS[1], KEYS[2]
local message, lease, owner, publish = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4]
local now = now_ms()

for i = 5, #ARGV do
    if hold_end(group, ARGV[i], owner, now) == nil then
        return nil
    end
end

local freed = false
for i = 5, #ARGV do
    local id = ARGV[i]
    if redis.call('hincrby', group, count_field(id, owner), -1) <= 0 then
        redis.call('hdel', group, id, expire_field(id, owner), count_field(id, owner))
        freed = true
    else
        extend_hold(group, id, owner, now, lease)
    end
end
if freed then
    redis.call(publish, channel, message)
    return 1
end
extend_ttl(group, lease)
return 0
