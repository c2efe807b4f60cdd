-- Fair semaphore: take permits in turn, or wait in line. (fsem_common.lua is
-- prepended.)
--
-- KEYS[1]  the semaphore HASH (the name)
-- KEYS[2]  the leases ZSET
-- KEYS[3]  the line LIST
-- KEYS[4]  the deadlines ZSET
-- ARGV[1]  the lease of what is taken, ms (from the server's now)
-- ARGV[2]  the hold id to take them under (new for every attempt)
-- ARGV[3]  the waiter id (one per acquire call: its place in line)
-- ARGV[4]  how many permits
-- ARGV[5]  "line": take in turn, else join (or stay in) the line;
--          "barge": take if available, whoever waits, never join
-- ARGV[6]  how long a silent waiter keeps its place, ms
-- ARGV[7]  the publish command: "publish" or "spublish"
-- ARGV[8]  the waiters' channel prefix
--
-- Reply: 0 when taken; otherwise (nothing taken) the ms until the first lease
-- ends, when permits come back without a release, or -1 when none will.

local semaphore, leases, queue, timeouts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local lease, hold, waiter = tonumber(ARGV[1]), ARGV[2], ARGV[3]
local wanted, mode, window = tonumber(ARGV[4]), ARGV[5], tonumber(ARGV[6])
local publish, channel_prefix = ARGV[7], ARGV[8]
local refused = foreign(semaphore, leases, queue, timeouts)
if refused then
    return redis.error_reply(refused)
end
local now = now_ms()

reclaim(semaphore, leases, now)
local head = live_head(semaphore, queue, timeouts, now, waiter)
local in_turn = head == false or head == waiter or mode == 'barge'

if in_turn and available(semaphore) >= wanted then
    redis.call('hincrby', semaphore, 'permits', -wanted)
    redis.call('hset', semaphore, 'hold:' .. hold, wanted)
    redis.call('zadd', leases, now + lease, hold)
    if head == waiter then
        leave(semaphore, queue, timeouts, waiter)
    end
    -- The next in line may be served by what is left.
    call_head(semaphore, queue, timeouts, now, publish, channel_prefix)
    return 0
end

if mode == 'line' then
    if redis.call('zscore', timeouts, waiter) == false then
        redis.call('rpush', queue, waiter)
    end
    redis.call('zadd', timeouts, now + window, waiter)
    redis.call('hset', semaphore, 'want:' .. waiter, wanted)
end
-- This attempt may have given back ended leases or removed a vanished head:
-- the head it left, another waiter, may be served now.
call_head(semaphore, queue, timeouts, now, publish, channel_prefix)

local first = redis.call('zrange', leases, 0, 0, 'WITHSCORES')
if first[2] == nil then
    return -1
end
return math.max(tonumber(first[2]) - now, 1)
