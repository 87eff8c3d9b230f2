-- reschedule: a new due time for a delayed or ready job.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] id, [3] delay_ms, [4] run_at_ms (-1: none)
-- Returns: 1 when moved, 0 when the job is absent, reserved or dead.
-- Events: reschedule.
local now = now_ms()
local id = ARGV[2]
local j = current(id, now)
if not j or j.state ~= PENDING then return 0 end
unindex(id, j)
local run_at = tonumber(ARGV[4])
j.due = now + tonumber(ARGV[3])
if run_at >= 0 then j.due = math.max(run_at, now) end
j.at = j.due
place_pending(id, j, now)
emit('reschedule', id, j)
wake(1)
return 1
