-- Watchdog: extend many group multi-lock holds in one call.
--
-- KEYS[i]    group hash i
-- ARGV[1]    the lease to extend to, in milliseconds
-- ARGV[i+1]  hold i, packed as "id1,id2,...|owner" (ids are base64: no ',' or
--            '|'; the owner is everything after the first '|')
--
-- Reply: an array with one entry per key: 1 when the owner still held every
--        member and the holds were extended, 0 when not (never renewed again).

local lease = tonumber(ARGV[1])
local now = now_ms()
local renewed = {}
for i, group in ipairs(KEYS) do
    local packed = ARGV[i + 1]
    local bar = string.find(packed, '|', 1, true)
    local owner = string.sub(packed, bar + 1)
    local ids = {}
    for id in string.gmatch(string.sub(packed, 1, bar - 1), '[^,]+') do
        ids[#ids + 1] = id
    end
    local held = redis.call('type', group).ok == 'hash'
    for _, id in ipairs(ids) do
        if held and hold_end(group, id, owner, now) == nil then
            held = false
        end
    end
    if held then
        for _, id in ipairs(ids) do
            extend_hold(group, id, owner, now, lease)
        end
        extend_ttl(group, lease)
        renewed[i] = 1
    else
        renewed[i] = 0
    end
end
return renewed
