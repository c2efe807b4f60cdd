-- Permit-expirable semaphore: helpers prepended to every pes_*.lua script before
-- it is loaded (scripts.rs concatenates semaphore_count.lua, this file and the
-- script), so the expiry rule and the count check are written once.
--
-- The semaphore is a STRING (permits available) and a ZSET of the permits taken:
-- member = the permit id (16 raw bytes), score = the epoch-ms instant its lease
-- ends. A permit taken without a lease (by Redisson's acquire()) has the score
-- NEVER.

local NEVER = 922337203685477

-- Why the semaphore's keys cannot be used, or nil: a count someone else wrote
-- that is not an integer (`permit_count`, from semaphore_count.lua, prepended
-- before this file), or a leases key of another type. Checked before
-- anything is written (a script's writes are not undone by a later error), and
-- never read as "no permits" (a waiter would wait for ever).
local function foreign(semaphore, timeouts)
    local leases = redis.call('type', timeouts).ok
    if leases ~= 'none' and leases ~= 'zset' then
        return 'WRONGTYPE the permit leases key ' .. timeouts .. ' holds a ' .. leases
    end
    local count, refused = permit_count(semaphore)
    if count == false then
        return refused
    end
    return nil
end

-- Returns every permit whose lease ended at or before `now` to the pool, and
-- tells the waiters when any came back.
local function reclaim_expired(semaphore, timeouts, channel, now, publish)
    local expired = redis.call('zrangebyscore', timeouts, 0, now)
    if #expired == 0 then
        return
    end
    -- ZREM in slices: unpack() of a very long list exceeds Lua's stack.
    for i = 1, #expired, 1000 do
        redis.call('zrem', timeouts, unpack(expired, i, math.min(i + 999, #expired)))
    end
    local available = redis.call('incrby', semaphore, #expired)
    if available > 0 then
        redis.call(publish, channel, available)
    end
end
