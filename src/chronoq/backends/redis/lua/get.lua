-- get: a job's record as a reader sees it now (no write).
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] id
-- Returns: {now, record} or false when there is no such job.
-- Events: none.
local raw = job_raw(ARGV[2])
if not raw then return false end
return {now_ms(), raw}
