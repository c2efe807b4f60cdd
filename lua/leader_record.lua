-- Leader election: record a win of this crate's participant, after its fenced
-- acquire, and announce it.
--
-- KEYS[1]  the lock hash (the election's name)
-- KEYS[2]  the token counter, redisson_lock_token:{name}
-- KEYS[3]  the leader record, redisson_locks_leader:{name} (a STRING, no TTL)
-- KEYS[4]  the election's channel, redisson_locks_leader__channel:{name}
-- ARGV[1]  the winner's owner field
-- ARGV[2]  the epoch it drew (the token, decimal)
-- ARGV[3]  the publish command: "publish" or "spublish"
--
-- Reply: the server's clock in epoch milliseconds when the record was written
--        (a string); nil, and nothing written, when the owner no longer holds the
--        lock or a later token was drawn: that win is over already.

local lock, counter, record, channel = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local owner, epoch, publish = ARGV[1], ARGV[2], ARGV[3]

if redis.call('hexists', lock, owner) == 0 or redis.call('get', counter) ~= epoch then
    return nil
end
-- Someone else's key of another type under the record's name: refused, not
-- overwritten.
local kind = redis.call('type', record).ok
if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('WRONGTYPE the leader record ' .. record .. ' holds a ' .. kind)
end

-- Seconds and microseconds as strings: joined as text, exact at any date.
local now = redis.call('time')
local since = now[1] .. string.format('%03d', math.floor(tonumber(now[2]) / 1000))

-- Written as text so the epoch stays exact (a Lua number is a double).
redis.call('set', record,
    '{"owner":' .. cjson.encode(owner) .. ',"epoch":' .. epoch .. ',"since_ms":' .. since .. '}')
redis.call(publish, channel, epoch)
return since
