-- Fair lock: helpers prepended to every fair_*.lua script before it is loaded
-- (scripts.rs concatenates them), so the queue rules are written once.
--
-- The queue is a LIST of owner fields in arrival order plus a ZSET holding, for each
-- waiter, the absolute epoch-ms deadline after which it is considered gone.

-- Removes waiters at the head of the queue whose deadline is at or before `now`,
-- stopping at the first live one. `keep` (the caller, evidently alive) is never
-- removed, even when its deadline has passed.
local function evict_stale_heads(queue, timeouts, now, keep)
    while true do
        local head = redis.call('lindex', queue, 0)
        if head == false or head == keep then
            return
        end
        local deadline = tonumber(redis.call('zscore', timeouts, head))
        if deadline ~= nil and deadline > now then
            return
        end
        redis.call('lpop', queue)
        redis.call('zrem', timeouts, head)
    end
end

-- The lock just became free: the waiter first in line, if any, is woken by
-- `message` on its own channel so that it takes it at once. Its deadline becomes
-- the later of its own and now + `grace` (a woken head needs only moments), but
-- no later than now + `cap` (the configured fair-lock wait). So a head that
-- vanished (a killed Redisson waiter, whose deadline was set when it joined)
-- blocks the line for at most the grace, or its own deadline if that comes later
-- (as with Redisson), and never more than the configured wait from here. A live
-- head of this crate keeps its own deadline ahead of it while it waits.
local function hand_to_head(queue, timeouts, channel_prefix, publish, message, now, grace, cap)
    local head = redis.call('lindex', queue, 0)
    if head == false then
        return
    end
    local deadline = tonumber(redis.call('zscore', timeouts, head)) or 0
    local given = math.min(now + cap, math.max(deadline, now + grace))
    if given ~= deadline then
        redis.call('zadd', timeouts, given, head)
    end
    redis.call(publish, channel_prefix .. ':' .. head, message)
end

-- Moves every deadline in `timeouts` earlier by `delta` ms: one ZRANGE and a few
-- variadic ZADDs rather than a ZINCRBY per waiter (this runs on every acquisition
-- from the queue, with the whole line waiting).
local function shift_all_deadlines(timeouts, delta)
    local flat = redis.call('zrange', timeouts, 0, -1, 'withscores')
    local batch = {}
    for i = 1, #flat, 2 do
        batch[#batch + 1] = tonumber(flat[i + 1]) - delta
        batch[#batch + 1] = flat[i]
        if #batch >= 1000 then
            redis.call('zadd', timeouts, unpack(batch))
            batch = {}
        end
    end
    if #batch > 0 then
        redis.call('zadd', timeouts, unpack(batch))
    end
end
