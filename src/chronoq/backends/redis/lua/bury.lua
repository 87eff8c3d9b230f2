-- bury: move a reserved job to dead.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] id, [3] lease, [4] error ('' for none)
-- Returns: 1, or false when the lease was lost.
-- Events: bury.
local now = now_ms()
local id = ARGV[2]
local j = lease_of(id, ARGV[3], now)
if not j then return false end
redis.call('ZREM', K_LEASED, id)
lease_ended(group_of(j.payload))
kill(id, j, now, 'bury', ARGV[4])
return 1
