-- dead: the oldest dead jobs of the shard, after the same upkeep as reserve.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] limit
-- Returns: {now, then pairs: id, record}.
-- Events: expire / dead for leases reclaimed by the upkeep.
local now = now_ms()
local made = upkeep(now)
if made > 0 then wake(made) end
local out = {now}
for _, id in ipairs(redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[2]) - 1)) do
  out[#out + 1] = id
  out[#out + 1] = job_raw(id)
end
return out
