-- far_jobs: a page of the shard's far jobs, for the jobs listing (logs.py; no write).
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] bucket start, [3] page, [4] index (a cursor: see
--   far_entries in lib/6_far.lua; 0 0 0 at first), [5] limit
-- Returns: {now, next cursor as {start, page, index} or false at the end, then
--   2 values per job: id, record}.
-- Events: none.
local jobs, after = far_entries(tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
                                tonumber(ARGV[5]))
local out = {now_ms(), after or false}
for i = 1, #jobs do out[i + 2] = jobs[i] end
return out
