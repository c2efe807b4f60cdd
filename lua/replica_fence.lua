-- Replica sync's fence: a write that changes nothing, sent on the connection
-- that then sends WAIT, so that the WAIT (which counts the writes of its own
-- connection) covers every write before it, the acquire's included.
--
-- KEYS[1]  the lock hash
-- ARGV[1]  the hash field that counts the owner's holds
--
-- Reply: 1 when the field exists (the hold is on this server; an increment by 0
--        is written, and replicated); 0 when it does not (nothing written: the
--        hold is not here, and nothing can confirm it).

if redis.call('hexists', KEYS[1], ARGV[1]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[1], 0)
    return 1
end
return 0
