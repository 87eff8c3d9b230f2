-- groups: the groups of the shard with the largest backlogs (due jobs), and the
-- paused ones, with their due jobs, live leases and whether paused.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] how many groups by backlog at most
-- Returns: 4 values per group: its name ('' the default group), due jobs, live
--   leases, paused (1/0); none when the shard is not under flow control.
-- Events: none (a read).
local k = K_READY .. '>k'
local top = redis.call('ZREVRANGE', k, 0, tonumber(ARGV[2]) - 1, 'WITHSCORES')
local names, ready = {}, {}
for i = 1, #top, 2 do
  names[#names + 1] = top[i]
  ready[top[i]] = tonumber(top[i + 1])
end
for _, g in ipairs(redis.call('SMEMBERS', K_READY .. '>p')) do
  if not ready[g] then
    names[#names + 1] = g
    ready[g] = tonumber(redis.call('ZSCORE', k, g)) or 0
  end
end
-- live leases: kept per group under a group concurrency, else counted here from
-- the leased set (a read of every lease's record: a stats call, not a hot path)
local leases = {}
if flags_have('g') then
  for _, g in ipairs(names) do leases[g] = tonumber(redis.call('HGET', K_READY .. '>l', g)) end
elseif #names > 0 then
  local ids = redis.call('ZRANGE', K_LEASED, 0, -1)
  local raws = jobs_raw(ids)
  for i = 1, #ids do
    if raws[i] then
      local g = group_of_raw(raws[i])
      leases[g] = (leases[g] or 0) + 1
    end
  end
end
local out = {}
for _, g in ipairs(names) do
  out[#out + 1] = g
  out[#out + 1] = ready[g]
  out[#out + 1] = leases[g] or 0
  out[#out + 1] = redis.call('SISMEMBER', K_READY .. '>p', g)
end
return out
