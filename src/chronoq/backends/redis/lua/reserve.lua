-- reserve: reclaim expired leases, promote due jobs, lease the best `count` ready jobs
-- (priority, then due time, then put order). DESIGN §1 "reserve", §6.
-- KEYS: the shard keys (see prelude).
-- ARGV: [1] event cap, [2] count, [3] ttr_ms (0: each job's own), [4] lease prefix (random)
-- Returns: {wake_in_ms, then 10 values per job: id, lease, deadline, attempts, due_at,
--   priority, max_attempts, ttr_ms, created_at, payload}; wake_in_ms is -1 when
--   jobs were leased or nothing is scheduled, else ms until the next delayed job is
--   due or lease expires.
-- Events: expire / dead for reclaimed leases, reserve for each job leased.
local now = now_ms()
upkeep(now)
if redis.call('EXISTS', K_PAUSED) == 1 then return {-1} end
local count, ttr_override, prefix = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4]
local members = redis.call('ZRANGE', K_READY, 0, count - 1)
if #members == 0 then
  redis.call('DEL', K_WAKE) -- nothing is ready: every token is stale
  local nexts = {}
  local d = redis.call('ZRANGE', K_DELAYED, 0, 0, 'WITHSCORES')[2]
  local l = redis.call('ZRANGE', K_LEASED, 0, 0, 'WITHSCORES')[2]
  if d then nexts[#nexts + 1] = tonumber(d) end
  if l then nexts[#nexts + 1] = tonumber(l) end
  if #nexts == 0 then return {-1} end
  return {math.max(math.min(unpack(nexts)) - now, 0)}
end
local out = {-1}
for _, member in ipairs(members) do
  local id = string.sub(member, 7)
  local j = unpack_job(redis.call('HGET', K_JOBS, id))
  local ttr = ttr_override > 0 and ttr_override or j.ttr
  j.att = j.att + 1
  j.state, j.lease, j.at = RESERVED, prefix .. string.format('%04x', #out / 10), now + ttr
  redis.call('HSET', K_JOBS, id, pack_job(j))
  redis.call('ZADD', K_LEASED, j.at, id)
  emit('reserve', id, j, now - j.due, nil)
  local n = #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4], out[n + 5] = id, j.lease, j.at, j.att, j.due
  out[n + 6], out[n + 7], out[n + 8], out[n + 9], out[n + 10] =
    j.prio, j.max, ttr, j.created, j.payload
end
redis.call('ZREM', K_READY, unpack(members))
-- more is ready: pass the baton to one more waiting consumer
if redis.call('ZCARD', K_READY) > 0 then wake(1) end
return out
