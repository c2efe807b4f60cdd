-- Fair semaphore: take permits in turn, or wait in line. (fsem_common.lua is
-- prepended.)
--
-- KEYS[1]  the semaphore HASH (the name)
-- KEYS[2]  the leases ZSET
-- KEYS[3]  the line LIST
-- KEYS[4]  the deadlines ZSET
-- ARGV[1]  the lease of what is taken, ms (from the server's now)
-- ARGV[2]  the waiter id, '<client>:<uuid>' (one per acquire call: its place in
--          line, and the id of the hold it takes)
-- ARGV[3]  how many permits
-- ARGV[4]  "line": take in turn, else join (or stay in) the line;
--          "barge": take if available, whoever waits, never join;
--          "keep": take nothing, call nobody, only keep the client's places
--          (its deadline moved ahead); the epoch is false when the waiter has
--          no place (lost: it joins again)
-- ARGV[5]  how long a silent client keeps its waiters' places, ms
-- ARGV[6]  the publish command: "publish" or "spublish"
-- ARGV[7]  the waiters' channel prefix
--
-- Reply: {1} when taken (or granted to it already by its client's release);
-- otherwise (nothing taken) {0, ms until something changes by itself (a
-- lease ends, or the first in line is taken for gone) or -1 when nothing
-- will, the client's epoch (false for a barge)}.

local semaphore, leases, queue, timeouts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local lease, waiter = tonumber(ARGV[1]), ARGV[2]
local wanted, mode, window = tonumber(ARGV[3]), ARGV[4], tonumber(ARGV[5])
local publish, channel_prefix = ARGV[6], ARGV[7]
local refused = foreign(semaphore)
if refused then
    return redis.error_reply(refused)
end
local now = now_ms()

reclaim(semaphore, leases, now)
local mine = redis.call('hmget', semaphore, 'permits', 'want:' .. waiter, 'hold:' .. waiter)

-- The waiter has its permits: out of the line if it was in it, and the next
-- in line called (what is left, or ended leases given back above, may serve
-- it).
local function served()
    if mine[2] ~= false then
        leave(semaphore, queue, waiter)
    end
    call_head(semaphore, queue, timeouts, now, publish, channel_prefix)
    return {1}
end

-- Granted already (its client's release, whose word has not reached it yet,
-- or this attempt's own earlier send whose reply was lost): taken, the lease
-- counted from now.
if mine[3] ~= false then
    redis.call('zadd', leases, now + lease, waiter)
    return served()
end

if mode == 'keep' then
    local epoch = false
    if mine[2] ~= false then
        epoch = keep(semaphore, timeouts, waiter, now, window)
    end
    -- Ended leases given back above may serve the first in line.
    call_head(semaphore, queue, timeouts, now, publish, channel_prefix)
    return {0, -1, epoch}
end

local head = live_head(semaphore, queue, timeouts, now, waiter)
local in_turn = head == false or head == waiter or mode == 'barge'

if in_turn and (tonumber(mine[1]) or 0) >= wanted then
    take(semaphore, leases, waiter, wanted, now + lease)
    return served()
end

local epoch = false
if mode == 'line' then
    epoch = join(semaphore, queue, timeouts, waiter, wanted, now, window, mine[2] ~= false)
end
-- This attempt may have given back ended leases or removed a vanished head:
-- the head it left, another waiter, may be served now (the caller, when it
-- is the head, cannot: it was just refused).
if head ~= waiter then
    call(semaphore, head, publish, channel_prefix)
end

-- What changes by itself, and when: the first lease's end (its permits come
-- back), and the end of the first in line's client's places (it is taken for
-- gone, and the next is first), whichever comes first.
local first = redis.call('zrange', leases, 0, 0, 'WITHSCORES')
local ends = tonumber(first[2])
if head ~= false and head ~= waiter then
    local gone_at = tonumber(redis.call('zscore', timeouts, client_of(head)))
    if gone_at ~= nil and (ends == nil or gone_at < ends) then
        ends = gone_at
    end
end
local hint = -1
if ends ~= nil then
    hint = math.max(ends - now, 1)
end
return {0, hint, epoch}
