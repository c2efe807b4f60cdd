-- Group multi-lock: take every member for one owner, or none.
--
-- KEYS[1]    the group hash
-- ARGV[1]    lease in milliseconds
-- ARGV[2]    owner
-- ARGV[3..]  member ids
--
-- Reply: nil when the owner now holds every member (one more hold of each);
--        otherwise the milliseconds until the last of the other owners' holds
--        on these members ends (the longest a waiter need sleep).

local group = KEYS[1]
local lease, owner = tonumber(ARGV[1]), ARGV[2]
local now = now_ms()

local busy = -1
for i = 3, #ARGV do
    local holder = redis.call('hget', group, ARGV[i])
    if holder and holder ~= owner then
        local ends = tonumber(redis.call('hget', group, expire_field(ARGV[i], holder)))
        if ends and ends >= now and ends - now > busy then
            busy = ends - now
        end
    end
end
if busy >= 0 then
    return math.max(busy, 1)
end

for i = 3, #ARGV do
    local id = ARGV[i]
    local holder = redis.call('hget', group, id)
    if holder and holder ~= owner then
        -- Another owner's ended hold: clear what it left.
        redis.call('hdel', group, expire_field(id, holder), count_field(id, holder))
    elseif holder and hold_end(group, id, owner, now) == nil then
        -- The owner's own hold ended: its count is stale, start again.
        redis.call('hdel', group, count_field(id, owner))
    end
    redis.call('hset', group, id, owner)
    extend_hold(group, id, owner, now, lease)
    redis.call('hincrby', group, count_field(id, owner), 1)
end
extend_ttl(group, lease)
return nil
