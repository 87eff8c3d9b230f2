-- touch: push the lease deadline of a reserved job to now + ttr.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] id, [3] lease, [4] ttr_ms (0: the job's own)
-- Returns: the new deadline (ms), or false when the lease was lost.
-- Events: touch.
local now = now_ms()
local id = ARGV[2]
local j = lease_of(id, ARGV[3], now)
if not j then return false end
local ttr = tonumber(ARGV[4])
if ttr <= 0 then ttr = j.ttr end
j.at = now + ttr
job_put(id, pack_job(j))
redis.call('ZADD', K_LEASED, j.at, id)
emit('touch', id, j)
return j.at
