-- delete: remove a job in any state.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] id
-- Returns: 1 when the job existed, else 0.
-- Events: delete.
local now = now_ms()
local id = ARGV[2]
local j = current(id, now)
if not j or j.state == REMEMBERED then return 0 end
remove(id, j, now)
emit('delete', id, j)
return 1
