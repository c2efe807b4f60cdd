-- Fenced lock: acquire or re-enter, and draw a fencing token.
--
-- KEYS[1]  the lock hash (the user's lock name)
-- KEYS[2]  the token counter, redisson_lock_token:{name} (a STRING, no TTL)
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field, "<client-uuid>:<id>"
--
-- Reply: {token} when the owner now holds the lock (first hold or re-entry): the
--        counter's new value as the server writes it (a string: INCR's reply
--        becomes a Lua number, a double, which is exact only up to 2^53), greater
--        than every token drawn before for this name; otherwise the lock's PTTL in
--        milliseconds, which bounds the caller's sleep.

local lock, counter = KEYS[1], KEYS[2]
local lease, owner = ARGV[1], ARGV[2]

-- A counter someone else wrote: refused before anything is written (a script's
-- writes are not undone when a later command of it fails).
local kind = redis.call('type', counter).ok
if kind ~= 'none' and kind ~= 'string' then
    return redis.error_reply('WRONGTYPE the fencing token counter ' .. counter .. ' holds a ' .. kind)
end
if kind == 'string' and not string.match(redis.call('get', counter), '^%-?%d+$') then
    return redis.error_reply('ERR the fencing token counter ' .. counter .. ' is not an integer')
end

-- The next token, exact over the whole range of the counter.
local function draw()
    redis.call('incr', counter)
    return {redis.call('get', counter)}
end

-- Free: the first hold, with exactly this lease.
if redis.call('exists', lock) == 0 then
    redis.call('hincrby', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return draw()
end

-- Already ours: one more hold (and a token of its own); the lease is extended,
-- never shortened.
if redis.call('hexists', lock, owner) == 1 then
    redis.call('hincrby', lock, owner, 1)
    if redis.call('pttl', lock) < tonumber(lease) then
        redis.call('pexpire', lock, lease)
    end
    return draw()
end

-- Held by someone else.
return redis.call('pttl', lock)
