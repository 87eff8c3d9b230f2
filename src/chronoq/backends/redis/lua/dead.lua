-- dead: the oldest dead jobs of the shard, after the same upkeep as reserve.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] limit
-- Returns: {now, then 3 values per job: id, record, time of death (ms)}: the
--   client merges the shards' lists by time of death.
-- Events: expire / dead for leases reclaimed by the upkeep.
local now = now_ms()
local made = upkeep(now)
if made > 0 then wake(made) end
local out = {now}
local dead = redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
for i = 1, #dead, 2 do
  out[#out + 1] = dead[i]
  out[#out + 1] = job_raw(dead[i])
  out[#out + 1] = dead[i + 1]
end
return out
