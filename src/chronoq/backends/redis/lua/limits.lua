-- limits: store a topic's limits on this shard (docs/contract.md §10; every shard
-- holds the same, each enforcing its share: lib/6_flow.lua, rule_share).
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] this shard's place '<shard>:<shards>', [3] the topic's
--   rule (chronoq.limits.Rule.pack; '' for none), [4] every group's default ('' for
--   none), [5] a group whose own rule is written ('' for none), [6] that rule ('' to
--   clear it), [7] the buckets full again, their rule changed: any of 't' (the
--   topic's), 'd' (every group's), 'g' (the group's), [8] what the limits need kept
--   (lib/6_flow.lua, flow_flags): the leases of the topic or of each group are
--   counted afresh from the leased set when they start being kept
-- Returns: 1. The shard is under flow control from here on; every waiting group
--   is looked at anew, and a waiting consumer woken.
-- Events: none.
flow_enable()
local f = K_READY .. '>f'
local before, flags = flow_flags(), ARGV[8]
redis.call('HSET', f, 'shard', ARGV[2], 'rule', ARGV[3], 'default', ARGV[4], 'flags', flags)
local function newly(c)
  return string.find(flags, c, 1, true) and not string.find(before, c, 1, true)
end
if newly('t') or newly('g') then -- the live leases: records reserved (a stale entry is not)
  local ids = redis.call('ZRANGE', K_LEASED, 0, -1)
  local raws, counts, total = jobs_raw(ids), {}, 0
  for i = 1, #ids do
    if raws[i] and state_of(raws[i]) == RESERVED then
      local g = group_of_raw(raws[i])
      counts[g], total = (counts[g] or 0) + 1, total + 1
    end
  end
  if newly('t') then redis.call('HSET', f, 'leased', total) end
  if newly('g') then
    redis.call('DEL', K_READY .. '>l')
    for g, k in pairs(counts) do redis.call('HSET', K_READY .. '>l', g, k) end
  end
end
flags_call, flags_are = CALL_NO, flags
local group, resets = ARGV[5], ARGV[7]
if group ~= '' then
  if ARGV[6] == '' then
    redis.call('HDEL', K_READY .. '>r', group)
  else
    redis.call('HSET', K_READY .. '>r', group, ARGV[6])
  end
end
if string.find(resets, 't', 1, true) then redis.call('HDEL', f, 'tokens', 'since') end
if string.find(resets, 'd', 1, true) then redis.call('DEL', K_READY .. '>b') end
if group ~= '' and string.find(resets, 'g', 1, true) then
  redis.call('HDEL', K_READY .. '>b', group)
end
flow_release_all()
wake(1)
return 1
