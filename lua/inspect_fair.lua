-- The inspector, for a fair semaphore (inspect.lua found its hash): its hash,
-- line, client deadlines and leases, read in one script, so that the snapshot
-- is consistent, and written by nothing. inspect_common.lua is prepended. A script of its own, called only for
-- a fair semaphore: an inspector whose ACL grants Redisson's keys alone
-- still reads every other kind (its keys are this crate's own).
--
-- KEYS[1]  the name: the fair semaphore's HASH
-- KEYS[2]  its line (LIST of waiter ids)
-- KEYS[3]  its client deadlines (ZSET client id -> epoch ms)
-- KEYS[4]  its leases (ZSET hold id -> epoch ms)
-- ARGV[1]  the most entries read of any one list, zset or hash
--
-- Reply: { server time in ms, type of KEYS[1], body (as inspect.lua's: field,
--          value, ..., then the hash's length; {} when it is no hash), line,
--          line length,
--          deadlines (member, score, ...), leases (member, score, ...),
--          leases count }

local name, line_key, deadlines_key, leases_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local bound = tonumber(ARGV[1])

local now = server_now_ms()

local kind = type_of(name)
local body = {}
if kind == 'hash' then
    body = hash_body(name, bound)
end

local line, line_length = list_head(line_key, bound)
local deadlines = zset_head(deadlines_key, bound)
local leases, leases_count = zset_head(leases_key, bound)

return { now, kind, body, line, line_length, deadlines, leases, leases_count }
