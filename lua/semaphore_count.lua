-- Shared by the scripts that read a semaphore's count, the plain semaphore's
-- and the permit-expirable one's (prepended to them).
--
-- A semaphore key is a STRING holding an integer, as Redisson writes it. A
-- value someone else wrote there is refused, never read as "no permits" (a
-- waiter would wait for ever) nor overwritten (it is not ours): the caller gets
-- an error naming the key at once. Another type is Redis' own WRONGTYPE (GET).

-- The count `semaphore` holds, or nil when it does not exist; `false, message`
-- when it holds something else.
local function permit_count(semaphore)
    local value = redis.call('get', semaphore)
    if value == false then
        return nil
    end
    if not string.match(value, '^%-?%d+$') then
        return false, 'ERR the semaphore ' .. semaphore .. ' holds a value that is not a '
            .. 'permit count (it was not written by a semaphore)'
    end
    return tonumber(value)
end
