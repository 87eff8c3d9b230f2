-- stats: counts by state of the shard, after the same upkeep as reserve.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap
-- Returns: {delayed, ready, reserved, dead, paused (1/0), next_due_at (-1: none)};
--   far jobs included (lib/7_far.lua).
-- Events: expire / dead for leases reclaimed by the upkeep.
local now = now_ms()
local made = upkeep(now)
if made > 0 then wake(made) end
-- due jobs the bounded upkeep has not promoted yet count as ready
local due = redis.call('ZCOUNT', K_DELAYED, '-inf', now)
local delayed = redis.call('ZCARD', K_DELAYED) - due
local first = redis.call('ZRANGE', K_DELAYED, due, due, 'WITHSCORES')[2]
-- far jobs count as delayed, but those of buckets wholly due (no consumer has
-- promoted them yet) as ready; a far bucket's start stands for its first due time
local far, far_due = far_due_count(now)
local far_first = redis.call('ZRANGE', K_FAR, 0, 0)[1]
if far_first and (not first or tonumber(far_first) < tonumber(first)) then first = far_first end
-- due jobs of named groups are in their own sets (lib/6_flow.lua)
local queued = flow_on() and tonumber(redis.call('HGET', K_READY .. '>f', 'queued')) or 0
return {delayed + far - far_due, redis.call('ZCARD', K_READY) + queued + due + far_due,
        redis.call('ZCARD', K_LEASED), redis.call('ZCARD', K_DEAD),
        redis.call('EXISTS', K_PAUSED), first or -1}
