-- stats: counts by state of the shard, after the same upkeep as reserve.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap
-- Returns: {delayed, ready, reserved, dead, paused (1/0), next_due_at (-1: none)}.
-- Events: expire / dead for leases reclaimed by the upkeep.
local now = now_ms()
local made = upkeep(now)
if made > 0 then wake(made) end
-- due jobs the bounded upkeep has not promoted yet count as ready
local due = redis.call('ZCOUNT', K_DELAYED, '-inf', now)
local delayed = redis.call('ZCARD', K_DELAYED) - due
local first = redis.call('ZRANGE', K_DELAYED, due, due, 'WITHSCORES')[2]
return {delayed, redis.call('ZCARD', K_READY) + due, redis.call('ZCARD', K_LEASED),
        redis.call('ZCARD', K_DEAD), redis.call('EXISTS', K_PAUSED), first or -1}
