-- Fair lock: acquire, re-enter, or wait in line. (fair_common.lua is prepended.)
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the queue LIST, redisson_lock_queue:{name}
-- KEYS[3]  the deadline ZSET, redisson_lock_timeout:{name}
-- ARGV[1]  lease in milliseconds
-- ARGV[2]  owner field
-- ARGV[3]  wait in milliseconds: how long a silent waiter keeps its place
-- ARGV[4]  now, epoch milliseconds (the caller's clock, as Redisson does)
-- ARGV[5]  "1" to join the queue when the lock cannot be taken, "0" to try once
-- ARGV[6]  "0" to refuse a re-entry (the non-reentrant fair lock); "2" for a
--          waiter whose client may grant it the lock with a release
--          (fair_release.lua): a hold it has is that grant, taken as acquired
--          without counting a second; otherwise a re-entry is allowed
-- ARGV[7]  the configured fair-lock wait, ms: what a waiter made first here gets
--          (not the caller's own wait, which a timed try may make short)
--
-- Reply: nil when the owner now holds the lock; -4 when the owner holds it and
--        re-entry is refused (nothing changed); otherwise how many milliseconds the
--        caller may sleep before trying again (<= 0: no useful bound):
--        the lock's PTTL for the first in line, the time until the waiter ahead
--        would be considered gone for the others.

local lock, queue, timeouts = KEYS[1], KEYS[2], KEYS[3]
local lease, owner = ARGV[1], ARGV[2]
local wait, now = tonumber(ARGV[3]), tonumber(ARGV[4])
local may_queue = ARGV[5] == '1'
local refuse_reentry = ARGV[6] == '0'
local granted_here = ARGV[6] == '2'
local cap = tonumber(ARGV[7])

local head, pttl = evict_stale_heads(lock, queue, timeouts, now, owner, cap)
local line_ttl = math.max(cap, wait)
local line_was_there = line_expires(queue, timeouts, line_ttl)
pttl = pttl or redis.call('pttl', lock)

-- Free, and nobody else is first in line: take it. The next in line becomes
-- first (fair_common.lua: no other deadline moves).
if pttl == -2 and (head == false or head == owner) then
    if head == owner then
        redis.call('lpop', queue)
        redis.call('zrem', timeouts, owner)
        -- The next in line waits for this hold: it must not go stale before
        -- this lease (plus a wait) is over, nor keep a deadline from joining
        -- that lies further out.
        local next_head = redis.call('lindex', queue, 0)
        if next_head ~= false then
            redis.call('zadd', timeouts, now + tonumber(lease) + wait, next_head)
        end
    end
    redis.call('hset', lock, owner, 1)
    redis.call('pexpire', lock, lease)
    return nil
end

-- Ours already: re-enter without queueing; the lease is extended, never shortened.
if pttl ~= -2 and redis.call('hexists', lock, owner) == 1 then
    if refuse_reentry then
        return -4
    end
    if not granted_here then
        redis.call('hincrby', lock, owner, 1)
    end
    -- A grant's lease ran from the release; the hold this waiter believes in
    -- runs from this attempt: restart it (never shorten).
    if pttl < tonumber(lease) then
        redis.call('pexpire', lock, lease)
    end
    return nil
end

-- Already in line: keep the place.
local mine = redis.call('zscore', timeouts, owner)
if mine ~= false then
    if head == owner then
        -- First in line and evidently alive: however long the hold lasts, keep
        -- the deadline at least `wait` ahead.
        if tonumber(mine) < now + wait then
            redis.call('zadd', timeouts, now + wait, owner)
        end
        return pttl
    end
    if head == false then
        return pttl
    end
    local ahead = tonumber(redis.call('zscore', timeouts, head))
    if ahead == nil then
        return pttl
    end
    return math.max(ahead - now, 1)
end

if not may_queue then
    return pttl
end

-- Join the tail: expected to wait for the waiter ahead (or the holder), plus grace.
local ttl = pttl
if head ~= false then
    local tail = redis.call('lindex', queue, -1)
    local tail_deadline = tonumber(redis.call('zscore', timeouts, tail))
    if tail_deadline ~= nil then
        ttl = tail_deadline - now
    end
end
redis.call('zadd', timeouts, now + ttl + wait, owner)
redis.call('rpush', queue, owner)
if not line_was_there then
    line_expires(queue, timeouts, line_ttl)
end
return ttl
