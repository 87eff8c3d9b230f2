-- group_pause: pause or resume one group of the topic on this shard; the others flow on.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] the group, [3] '1' to pause, '0' to resume
-- Returns: 1. The shard is under flow control from here on (lib/6_flow.lua).
-- Events: none.
flow_enable()
local group = ARGV[2]
if ARGV[3] == '1' then
  redis.call('SADD', K_READY .. '>p', group)
  turn_leave(group, true) -- its place kept for its resume
else
  redis.call('SREM', K_READY .. '>p', group)
  group_wake(group)
  wake(1)
end
return 1
