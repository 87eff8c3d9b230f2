-- get: a job's record as a reader sees it now (no write), near or far.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] id
-- Returns: {now, record} or false when there is no such job.
-- Events: none.
local raw = job_raw(ARGV[2])
if not raw then
  local _
  _, raw = far_locate(ARGV[2])
  if not raw then return false end
end
return {now_ms(), raw}
