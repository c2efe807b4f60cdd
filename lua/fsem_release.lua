-- Fair semaphore: give back the permits held under one id, grant what that
-- frees to the releasing client's own waiters while they are first in line,
-- and call the first in line. (fsem_common.lua is prepended.)
--
-- KEYS[1..4] as fsem_acquire.lua
-- ARGV[1]  the hold id
-- ARGV[2]  the publish command
-- ARGV[3]  the waiters' channel prefix
-- ARGV[4]  the releasing client's id: its waiters first in line are granted
--          what they ask for, each under its own waiter id (its client hands
--          the grant over in process: no message, no attempt); '' grants none
-- ARGV[5]  the lease of a grant, ms
--
-- Reply: {1 when the hold was out and its permits are back, else 0 (never
-- taken, released already, or its lease ended: its permits are back all the
-- same), then the waiter ids granted, in line order}.
--
-- Only the releaser's own waiters are granted to: its client knows they are
-- alive, and a grant to a waiter that vanished would keep its permits for a
-- lease. Another client's first in line is called, as by every script.

local semaphore, leases, queue, timeouts = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local hold, publish, channel_prefix = ARGV[1], ARGV[2], ARGV[3]
local client, grant_lease = ARGV[4], tonumber(ARGV[5])
local refused = foreign(semaphore)
if refused then
    return redis.error_reply(refused)
end
local now = now_ms()

reclaim(semaphore, leases, now)
local reply = {0}
if give_back(semaphore, leases, hold) ~= nil then
    reply[1] = 1
end
local head = live_head(semaphore, queue, timeouts, now, nil)
while head ~= false and client_of(head) == client do
    local asks = redis.call('hmget', semaphore, 'want:' .. head, 'permits')
    local want = tonumber(asks[1])
    if want == nil then
        -- An entry that asks nothing (its ask deleted from under it) is no
        -- waiter: removed, never granted.
        redis.call('lpop', queue)
        head = live_head(semaphore, queue, timeouts, now, nil)
    elseif (tonumber(asks[2]) or 0) < want then
        break
    else
        take(semaphore, leases, head, want, now + grant_lease)
        -- The head: LPOP, where LREM would do the same.
        redis.call('lpop', queue)
        redis.call('hdel', semaphore, 'want:' .. head)
        reply[#reply + 1] = head
        head = live_head(semaphore, queue, timeouts, now, nil)
    end
end
-- Another client's waiter, or one of the releaser's that asks for more.
call(semaphore, head, publish, channel_prefix)
return reply
