-- Fair lock: helpers prepended to every fair_*.lua script before it is loaded
-- (scripts.rs concatenates them), so the queue rules are written once.
--
-- The queue is a LIST of owner fields in arrival order plus a ZSET holding, for each
-- waiter, the absolute epoch-ms deadline after which it is considered gone.
--
-- Only the first in line's deadline is ever acted on: the others matter once
-- they are first. So nothing here walks the line: a deadline is set when a
-- waiter joins (the one ahead's plus a wait, as Redisson sets it) and set again
-- when the waiter becomes first (after an acquisition, a release, an eviction),
-- to what it would have shrunk to had every deadline moved up with the line.
-- Every script is then O(1) in the line's length (O(log n) for the ZSET), where
-- moving every deadline on every acquisition made serving a line of n waiters
-- O(n^2). Redisson's own scripts still move them when Java acquires, and do
-- not reset the deadline of a waiter they make first: `evict_stale_heads` below
-- brings such a deadline in, so a dead waiter of ours holds a mixed line for
-- about a wait, as with Redisson alone.

-- The waiter first in line became first at `now`: it gets `window` from here to
-- take or keep its place. Set whatever its deadline was: one it joined with
-- may lie far ahead (deadlines do not move with the line) or already be past (a
-- waiter refreshes its own only while first). `keep` (a caller evidently
-- alive, or nil) keeps its own. Returns the first in line (false: nobody).
local function became_first(queue, timeouts, now, window, keep)
    local head = redis.call('lindex', queue, 0)
    if head ~= false and head ~= keep then
        redis.call('zadd', timeouts, now + window, head)
    end
    return head
end

-- Removes waiters at the head of the queue whose deadline is at or before `now`,
-- stopping at the first live one, and returns the head left (false when the
-- queue is empty) and the lock's PTTL if it read it (else nil), which the
-- caller uses instead of reading them again. `keep` (the caller, evidently
-- alive) is never removed, even when its deadline has passed. The waiter that
-- becomes first by an eviction gets `window` to show up.
--
-- A first in line needs at most the lock's remaining lease plus a window; a
-- deadline further out is one it joined with, left unshrunk because this
-- crate's acquisitions do not move the line's deadlines (a waiter made first by
-- one of Redisson's scripts, which do not reset it). It is brought in to that
-- bound here, so a dead waiter holds the line for about a window, as with
-- Redisson alone. The lease is read only for a deadline beyond `now + window`:
-- one within it is within the bound whatever the lease.
local function evict_stale_heads(lock, queue, timeouts, now, keep, window)
    local head = redis.call('lindex', queue, 0)
    local lock_pttl = nil
    while head ~= false and head ~= keep do
        local deadline = tonumber(redis.call('zscore', timeouts, head))
        if deadline ~= nil and deadline > now + window then
            lock_pttl = lock_pttl or redis.call('pttl', lock)
            local bound = now + math.max(lock_pttl, 0) + window
            if deadline > bound then
                redis.call('zadd', timeouts, bound, head)
                return head, lock_pttl
            end
        end
        if deadline ~= nil and deadline > now then
            return head, lock_pttl
        end
        redis.call('lpop', queue)
        redis.call('zrem', timeouts, head)
        head = became_first(queue, timeouts, now, window, keep)
    end
    return head, lock_pttl
end

-- The lock just became free: the waiter first in line, if any, is woken by
-- `message` on its own channel so that it takes it at once. Its deadline becomes
-- the later of its own and now + `grace` (a woken head needs only moments), but
-- no later than now + `cap` (the configured fair-lock wait). So a head that
-- vanished (a killed Redisson waiter, whose deadline was set when it joined)
-- blocks the line for at most the grace, or its own deadline if that comes later
-- (as with Redisson), and never more than the configured wait from here. A live
-- head of this crate keeps its own deadline ahead of it while it waits. `head`
-- is the first in line when the caller knows it (false: nobody), nil to read it.
local function hand_to_head(queue, timeouts, channel_prefix, publish, message, now, grace, cap, head)
    if head == nil then
        head = redis.call('lindex', queue, 0)
    end
    if head == false then
        return false
    end
    local deadline = tonumber(redis.call('zscore', timeouts, head)) or 0
    local given = math.min(now + cap, math.max(deadline, now + grace))
    if given ~= deadline then
        redis.call('zadd', timeouts, given, head)
    end
    redis.call(publish, channel_prefix .. ':' .. head, message)
    return true
end

-- The line outlives the last script that touched it by `ttl` (the configured
-- fair-lock wait, or a joining waiter's own wait if longer) at most, and by
-- three quarters of it at least: every live waiter of this crate is back within
-- half of its wait (its sleep is bounded so), so a line whose waiters all died
-- (killed processes, lost connections) leaves Redis by itself within a wait,
-- whoever comes back, and a live line never does. The TTLs are set again only
-- once a quarter of one has run out, so a busy line costs two PTTLs a script
-- and no write. Both keys are set together, to the same TTL, never shortened
-- (a longer wait set it): the queue must not outlive its deadlines (Redisson's
-- eviction reads a missing deadline as nil, and fails), nor the deadlines the
-- queue (a waiter with a deadline and no place would never be first).
-- Redisson's scripts do not mind a TTL: a line that is gone is an empty one,
-- and their writes to it keep the TTL. Called first by every script (so a line
-- that exists has its TTL set), and again after a join when the line was not
-- all there before it. Returns whether both keys existed.
local function line_expires(queue, timeouts, ttl)
    local renew_below = ttl - math.floor(ttl / 4)
    local queue_ttl = redis.call('pttl', queue)
    local timeouts_ttl = redis.call('pttl', timeouts)
    -- A key without a TTL (-1) or gone (-2, where PEXPIRE does nothing) is below.
    if queue_ttl < renew_below or timeouts_ttl < renew_below then
        local to = math.max(ttl, queue_ttl, timeouts_ttl)
        redis.call('pexpire', queue, to)
        redis.call('pexpire', timeouts, to)
    end
    return queue_ttl ~= -2 and timeouts_ttl ~= -2
end
