-- pause: set or clear the paused flag of the shard.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] 1 to pause, 0 to resume
-- Returns: 1.
-- Events: none (pausing moves no job).
if ARGV[2] == '1' then
  redis.call('SET', K_PAUSED, '1')
else
  redis.call('DEL', K_PAUSED)
  wake(MAX_WAKE_TOKENS)
end
return 1
