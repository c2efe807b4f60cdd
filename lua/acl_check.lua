-- The checkup's look at the ACL (inspect/doctor.rs): which of the commands the
-- lock scripts run on a lock's keys and channel the calling user may not run.
-- Nothing is run: redis.acl_check_cmd (Redis 7.0 and later) only asks.
--
-- KEYS[1]  a key in the slot being checked
-- ARGV[1]  a channel of that key, as a lock's unlock channel is named
-- ARGV[2]  the publish command: "publish" or "spublish"
-- ARGV[3]  the subscribe command: "subscribe" or "ssubscribe"
--
-- Reply: the names of the commands refused (empty when all are allowed).

local key, channel = KEYS[1], ARGV[1]
local probes = {
    {'exists', key}, {'type', key}, {'get', key}, {'set', key, 'v'}, {'del', key},
    {'strlen', key}, {'incr', key}, {'incrby', key, '1'}, {'decr', key},
    {'decrby', key, '1'}, {'rename', key, key}, {'pexpire', key, '1'}, {'pttl', key},
    {'hget', key, 'f'}, {'hset', key, 'f', 'v'}, {'hincrby', key, 'f', '1'},
    {'hexists', key, 'f'}, {'hdel', key, 'f'}, {'hlen', key}, {'hkeys', key},
    {'hstrlen', key, 'f'}, {'hscan', key, '0'},
    {'zadd', key, '1', 'm'}, {'zscore', key, 'm'}, {'zrem', key, 'm'},
    {'zrange', key, '0', '0'}, {'zrank', key, 'm'}, {'zrangebyscore', key, '0', '1'},
    {'zpopmin', key}, {'zcard', key},
    {'rpush', key, 'v'}, {'lpop', key}, {'lindex', key, '0'}, {'lrem', key, '0', 'v'},
    {'lrange', key, '0', '0'}, {'llen', key},
    {'time'}, {ARGV[2], channel, 'm'}, {ARGV[3], channel},
}
local refused = {}
for _, probe in ipairs(probes) do
    if not redis.acl_check_cmd(unpack(probe)) then
        table.insert(refused, probe[1])
    end
end
return refused
