-- Reentrant lock: release every hold of every owner.
--
-- KEYS[1]  the lock hash
-- KEYS[2]  the unlock channel
-- ARGV[1]  the unlock message ("0")
-- ARGV[2]  the publish command: "publish" or "spublish"; empty for none (spin lock)
--
-- Reply: 1 when a lock was deleted (and a waiter woken), 0 when there was none.

if redis.call('del', KEYS[1]) == 1 then
    if ARGV[2] ~= '' then
        redis.call(ARGV[2], KEYS[2], ARGV[1])
    end
    return 1
end
return 0
