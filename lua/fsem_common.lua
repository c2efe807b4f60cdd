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
--                                             'want:<waiter>' -> permits a waiter in
--                                             line asks (its mark of being in line);
--                                             'line:<client>' -> the epoch of that
--                                             client's places (see below)
--   redisson_fair_semaphore_leases:{name}     ZSET hold id -> lease end, epoch ms
--   redisson_fair_semaphore_queue:{name}      LIST waiter ids, in arrival order
--   redisson_fair_semaphore_timeout:{name}    ZSET client id -> epoch-ms instant after
--                                             which its waiters are taken for gone
--   redisson_fair_semaphore__channel:{name}:<client>   the client's channel: a
--                                             message names the waiter it calls
--
-- A waiter's id is '<client>:<uuid>', and a hold taken by a waiter has the
-- waiter's id: a grant made to it (by a release of its own client, see
-- fsem_release.lua) is found by its next attempt, and given back by its leave.
--
-- Waiters are served strictly in arrival order: permits go to the first in
-- line only, and a first in line that asks for more than are available holds
-- back everyone behind it (as java.util.concurrent.Semaphore(n, true) does).
-- Only a try with no wait barges (its Java namesake tryAcquire() does too).
--
-- Places are kept per client, not per waiter: one attempt by any waiter of a
-- client moves the client's deadline ahead, so that its parked waiters send
-- nothing. A client whose deadline passed is gone: its deadline and epoch go
-- at once, its waiters as they come first. The epoch ('line:<client>', the id
-- of the waiter whose join made it, and when) changes only when the client's places
-- were lost (its deadline passed, the keys were deleted, a failover lost
-- them): a client that sees a new epoch tells its waiters to join again.

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

-- Why `key` cannot be used as a `want` key (`what`), or nil.
local function wrong_type(key, want, what)
    local kind = redis.call('type', key).ok
    if kind == 'none' or kind == want then
        return nil
    end
    local hint = ''
    if want == 'hash' and kind == 'string' then
        hint = ' (a Redisson RSemaphore of the same name?)'
    end
    return 'WRONGTYPE ' .. what .. ' key ' .. key .. ' holds a ' .. kind .. hint
end

-- Why the semaphore cannot be used, or nil: its key is not a hash (a
-- Redisson RSemaphore of the same name is a string), or its count is not a
-- number. Checked before anything is written (a script's writes are not
-- undone by a later error). The other keys are this crate's own (prefixed,
-- never shared with Redisson) and are not checked, to spare every script
-- three commands: one of the wrong type fails the script with Redis's
-- WRONGTYPE, after at most the clean-ups any script makes first (ended
-- leases back, gone clients' waiters removed), which leave a consistent state.
local function foreign(semaphore)
    local refused = wrong_type(semaphore, 'hash', 'the fair semaphore')
    if refused then
        return refused
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

-- The client a waiter id belongs to ('<client>:<uuid>').
local function client_of(waiter)
    return string.match(waiter, '^(.*):') or waiter
end

-- Leaves the line: place and what it asked for. Returns whether it had one.
local function leave(semaphore, queue, waiter)
    if redis.call('hdel', semaphore, 'want:' .. waiter) == 0 then
        return false
    end
    redis.call('lrem', queue, 1, waiter)
    return true
end

-- A client that is gone (its deadline passed: a live one moves its own
-- ahead at every attempt) loses its deadline and epoch: if it was alive
-- after all, its next attempt sees a new epoch, and its waiters join again.
local function forget(semaphore, timeouts, client)
    redis.call('hdel', semaphore, 'line:' .. client)
    redis.call('zrem', timeouts, client)
end

-- Forgets up to 100 clients whose deadline passed. Called by joins, leaves
-- and permit changes, not by every script: a gone client's waiters are
-- removed as they come first whatever this finds (see `live_head`); this
-- only keeps the deadlines of clients that left no waiter from piling up.
local function reap(semaphore, timeouts, now)
    local lapsed = redis.call('zrangebyscore', timeouts, '-inf', now, 'LIMIT', 0, 100)
    for _, client in ipairs(lapsed) do
        forget(semaphore, timeouts, client)
    end
end

-- Moves the deadline of the client of `waiter` `window` ms ahead. Returns
-- the client's epoch (made, with the waiter's id, when it has none).
local function keep(semaphore, timeouts, waiter, now, window)
    local client = client_of(waiter)
    redis.call('zadd', timeouts, now + window, client)
    local epoch = redis.call('hget', semaphore, 'line:' .. client)
    if epoch == false then
        -- New each time it is made (one waiter may make it twice: after a
        -- loss its client must see a change).
        epoch = waiter .. '@' .. now
        redis.call('hset', semaphore, 'line:' .. client, epoch)
    end
    return epoch
end

-- Joins the line (or keeps the place there: `in_line`), asking for
-- `wanted`, and keeps the client's places. Returns the client's epoch.
local function join(semaphore, queue, timeouts, waiter, wanted, now, window, in_line)
    if not in_line then
        reap(semaphore, timeouts, now)
        redis.call('rpush', queue, waiter)
    end
    redis.call('hset', semaphore, 'want:' .. waiter, wanted)
    return keep(semaphore, timeouts, waiter, now, window)
end

-- Removes the waiters at the head of the line whose client is gone, stopping
-- at the first live one or at `keep` (the caller, evidently alive). Returns
-- the head left, false when the line is empty. Only the head is looked at: a
-- waiter of a gone client further back keeps its entry until it comes
-- first, and is removed then.
local function live_head(semaphore, queue, timeouts, now, keep)
    local head = redis.call('lindex', queue, 0)
    while head ~= false and head ~= keep do
        local client = client_of(head)
        local deadline = tonumber(redis.call('zscore', timeouts, client))
        if deadline ~= nil and deadline > now then
            return head
        end
        if deadline ~= nil then
            forget(semaphore, timeouts, client)
        end
        redis.call('lpop', queue)
        redis.call('hdel', semaphore, 'want:' .. head)
        head = redis.call('lindex', queue, 0)
    end
    return head
end

-- Takes `wanted` permits under hold id `hold`, leased until `lease_end`.
local function take(semaphore, leases, hold, wanted, lease_end)
    redis.call('hincrby', semaphore, 'permits', -wanted)
    redis.call('hset', semaphore, 'hold:' .. hold, wanted)
    redis.call('zadd', leases, lease_end, hold)
end

-- Gives back the permits held under `hold`; how many (nil: none were).
local function give_back(semaphore, leases, hold)
    local n = tonumber(redis.call('hget', semaphore, 'hold:' .. hold))
    if n ~= nil then
        redis.call('hdel', semaphore, 'hold:' .. hold)
        redis.call('zrem', leases, hold)
        redis.call('hincrby', semaphore, 'permits', n)
    end
    return n
end

-- Tells `head`, the first in line (false: nobody), on its client's channel,
-- when what it asks for is available (the message: its waiter id). Nobody
-- else is told: the line is served in order, one head at a time.
local function call(semaphore, head, publish, channel_prefix)
    if head == false then
        return
    end
    local asks = redis.call('hmget', semaphore, 'want:' .. head, 'permits')
    if (tonumber(asks[2]) or 0) >= (tonumber(asks[1]) or 1) then
        redis.call(publish, channel_prefix .. ':' .. client_of(head), head)
    end
end

-- Calls the first in line (see `call`), once the gone are removed.
local function call_head(semaphore, queue, timeouts, now, publish, channel_prefix)
    call(semaphore, live_head(semaphore, queue, timeouts, now, nil), publish, channel_prefix)
end
