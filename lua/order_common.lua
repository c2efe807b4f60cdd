-- The order of this crate's waiting clients, and the turn a release names:
-- helpers prepended to the scripts of the kinds that keep one (the reentrant
-- lock's lock_acquire.lua and lock_release.lua, the write lock's
-- rw_write_acquire.lua and rw_write_release.lua), which say why.
--
-- The order is a ZSET of client id -> arrival (microseconds), {name}:rl-waiters;
-- the turn a STRING naming one client for a few milliseconds, {name}:rl-turn.
-- Both are this crate's alone, a hint among its clients, never a gate for
-- Redisson's: its scripts ignore them.

-- Busy: a waiter's `client` joins `order` (at its tail; first again if its
-- turn was named and someone else took the lock first), and learns how many
-- clients are ahead. `pause` bounds its sleep; without an order, that alone
-- is the reply.
local function order_busy(order, turn, client, keep, pause)
    if not order then
        return pause
    end
    if redis.call('get', turn) == client then
        local first = redis.call('zrange', order, 0, 0, 'WITHSCORES')
        local score = first[2] and tonumber(first[2]) - 1 or 0
        redis.call('zadd', order, string.format('%.0f', score), client)
    else
        local now = redis.call('time')
        redis.call('zadd', order, 'NX', now[1] .. string.format('%06d', now[2]), client)
    end
    redis.call('pexpire', order, keep)
    return {pause, redis.call('zrank', order, client)}
end

-- The lock is free: nil when `client` may take it now (its own turn ends,
-- and, `joined`, it leaves the order), else what is left of another client's
-- turn, the bound of its sleep (if the client named never comes, nothing else
-- announces that the lock is free).
local function order_turn_keeps(order, turn, client, joined)
    if not turn then
        return nil
    end
    local named = redis.call('get', turn)
    if named and named ~= client then
        return redis.call('pttl', turn)
    end
    if named then
        redis.call('del', turn)
    end
    if joined then
        redis.call('zrem', order, client)
    end
    return nil
end

-- A release freed the lock and its unlock message reached `woken` clients:
-- the first client in the order (if any) is named for the turn, `turn_ms`
-- long. Its waiter, woken by this message, is the one that tries. (A client
-- in the order listens: nobody listening, nobody waits, and nothing is done.)
local function order_name_next(order, turn, turn_ms, woken)
    if not order or woken == 0 then
        return
    end
    local first = redis.call('zpopmin', order)
    if first[1] then
        redis.call('set', turn, first[1], 'PX', turn_ms)
    end
end
