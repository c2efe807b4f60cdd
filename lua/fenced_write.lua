-- Fencing kit: write a value only for a token newer than the one stored with it.
--
-- KEYS[1]  the store, a HASH: field `value` (the data), field `fence` (the
--          token of the write that set it, a decimal integer)
-- ARGV[1]  the writer's token, a decimal integer without leading zeros (> 0)
-- ARGV[2]  the value
--
-- Reply: {1, token} when written (the token is now the stored fence); {0, fence}
--        when refused: the stored fence is newer than the writer's token. An
--        equal token writes: tokens are drawn once per acquisition, so an equal
--        one is the same hold writing again. The fence as a string: tokens are
--        compared as digit strings, exact over all of u64 (a Lua number is a
--        double, exact only to 2^53).

local store, token, value = KEYS[1], ARGV[1], ARGV[2]

-- A key someone else wrote: refused before anything is written.
local kind = redis.call('type', store).ok
if kind ~= 'none' and kind ~= 'hash' then
    return redis.error_reply('WRONGTYPE the fenced store ' .. store .. ' holds a ' .. kind)
end
local fence = redis.call('hget', store, 'fence')
if fence and not string.match(fence, '^%d+$') then
    return redis.error_reply('ERR the fence of ' .. store .. ' is not a token: ' .. fence)
end

-- Is decimal `a` greater than decimal `b`? Without leading zeros (a fence
-- written elsewhere may have some), longer is larger; of one length, the
-- later in byte order.
local function newer(a, b)
    a = string.gsub(a, '^0+(%d)', '%1')
    b = string.gsub(b, '^0+(%d)', '%1')
    if #a ~= #b then
        return #a > #b
    end
    return a > b
end

if fence and newer(fence, token) then
    return {0, fence}
end
redis.call('hset', store, 'value', value, 'fence', token)
return {1, token}
