-- Fair semaphore: helpers prepended to every fsem_*.lua script before it is
-- loaded (scripts.rs concatenates them), so its rules are written once.
--
-- Redisson has no fair semaphore; this layout follows its naming style and the
-- fair lock's queue shape, and keeps apart from its RSemaphore: the semaphore
-- key is a HASH (an RSemaphore of the same name is a STRING, so each refuses
-- the other with WRONGTYPE, never reading the other's count):
--
--   name                                      HASH 'permits' -> permits available;
--                                             'hold:<id>' -> permits held under <id>;
--                                             'want:<waiter>' -> permits a waiter asks
--   redisson_fair_semaphore_leases:{name}     ZSET hold id -> lease end, epoch ms
--   redisson_fair_semaphore_queue:{name}      LIST waiter ids, in arrival order
--   redisson_fair_semaphore_timeout:{name}    ZSET waiter id -> epoch-ms instant after
--                                             which it is taken for gone
--   redisson_fair_semaphore__channel:{name}:<waiter>   the waiter's own channel
--
-- Waiters are served strictly in arrival order: permits go to the first in
-- line only, and a first in line that asks for more than are available holds
-- back everyone behind it (as java.util.concurrent.Semaphore(n, true) does).
-- Only a try with no wait barges (its Java namesake tryAcquire() does too).

-- Time is the server's (TIME): every client agrees on when a lease or a place
-- in line ends, whatever their clocks say (Redisson has no such object whose
-- Java clients would use their own, as they do for the permit-expirable one).
if redis.replicate_commands then
    redis.replicate_commands()
end

local function now_ms()
    local t = redis.call('time')
    return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Why the semaphore's keys cannot be used, or nil. Checked before anything is
-- written (a script's writes are not undone by a later error).
local function foreign(semaphore, leases, queue, timeouts)
    local wanted = {{semaphore, 'hash', 'the fair semaphore'}, {leases, 'zset', 'the permit leases'},
        {queue, 'list', "the waiters' line"}, {timeouts, 'zset', "the waiters' deadlines"}}
    for _, key in ipairs(wanted) do
        if key[1] ~= nil and key[1] ~= false then
            local kind = redis.call('type', key[1]).ok
            if kind ~= 'none' and kind ~= key[2] then
                local hint = ''
                if key[2] == 'hash' and kind == 'string' then
                    hint = ' (a Redisson RSemaphore of the same name?)'
                end
                return 'WRONGTYPE ' .. key[3] .. ' key ' .. key[1] .. ' holds a ' .. kind .. hint
            end
        end
    end
    local permits = redis.call('hget', semaphore, 'permits')
    if permits ~= false and not string.match(permits, '^%-?%d+$') then
        return 'ERR the fair semaphore ' .. semaphore .. ' holds a permit count that is not a number'
    end
    return nil
end

local function available(semaphore)
    return tonumber(redis.call('hget', semaphore, 'permits')) or 0
end

-- Every hold whose lease ended at or before `now` gives its permits back.
-- Returns how many holds ended.
local function reclaim(semaphore, leases, now)
    local ended = redis.call('zrangebyscore', leases, 0, now)
    for _, id in ipairs(ended) do
        local n = tonumber(redis.call('hget', semaphore, 'hold:' .. id)) or 0
        redis.call('hdel', semaphore, 'hold:' .. id)
        if n > 0 then
            redis.call('hincrby', semaphore, 'permits', n)
        end
    end
    -- ZREM in slices: unpack() of a very long list exceeds Lua's stack.
    for i = 1, #ended, 1000 do
        redis.call('zrem', leases, unpack(ended, i, math.min(i + 999, #ended)))
    end
    return #ended
end

-- Leaves the line: place, deadline and what it asked for.
local function leave(semaphore, queue, timeouts, waiter)
    redis.call('lrem', queue, 1, waiter)
    redis.call('zrem', timeouts, waiter)
    redis.call('hdel', semaphore, 'want:' .. waiter)
end

-- Removes the waiters at the head of the line whose deadline has passed (gone:
-- a live waiter moves its own deadline ahead at every attempt), stopping at
-- the first live one or at `keep` (the caller, evidently alive). Returns the
-- head left, false when the line is empty. Only the head is looked at: a
-- waiter that vanished further back keeps its entry until it comes first,
-- and is removed then, a window after its last attempt at most.
local function live_head(semaphore, queue, timeouts, now, keep)
    local head = redis.call('lindex', queue, 0)
    while head ~= false and head ~= keep do
        local deadline = tonumber(redis.call('zscore', timeouts, head))
        if deadline ~= nil and deadline > now then
            return head
        end
        redis.call('lpop', queue)
        redis.call('zrem', timeouts, head)
        redis.call('hdel', semaphore, 'want:' .. head)
        head = redis.call('lindex', queue, 0)
    end
    return head
end

-- Tells the first in line, on its own channel, when what it asks for is
-- available (the message: the permits available). Nobody else is told: the
-- line is served in order, one head at a time.
local function call_head(semaphore, queue, timeouts, now, publish, channel_prefix)
    local head = live_head(semaphore, queue, timeouts, now, nil)
    if head == false then
        return
    end
    local want = tonumber(redis.call('hget', semaphore, 'want:' .. head)) or 1
    local free = available(semaphore)
    if free >= want then
        redis.call(publish, channel_prefix .. ':' .. head, free)
    end
end
