-- reserve: reclaim expired leases, promote due jobs, lease the best `count` ready jobs
-- (priority, then due time, then put order). docs/contract.md §1 "reserve", §6.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] count, [3] ttr_ms (0: each job's own), [4] lease token
--   (random, fresh for each call), [5] waiter token ('' when the caller will not wait)
-- Returns: {wake_in_us, timer, lease token, then 2 values per job: id, its record
--   as leased (the client reads attempts, deadline, due_at, payload... from it)}.
--   When nothing was leased: {wake_in_us, timer}, wake_in_us saying when the
--   caller should look again (-1: only when woken; 0: at once). The waiter that
--   holds the shard's timer (timer = 1) is told the time until the next delayed
--   job is due, lease expires or far bucket is to be promoted; one other waiter,
--   the backup, when that timer
--   would lapse (TIMER_LEASE after its time: the holder died or froze), and
--   the rest BACKUP_SLACK later, as the timer holder wakes the others through
--   the wake list. A holder
--   that leases jobs gives the timer up (timer = 0) and wakes one other waiter
--   to take it; a waiter that takes a timer nobody held wakes one other waiter,
--   the backup that times the lapse.
--   On a shard under flow control (lib/6_flow.lua) one job per turn among its
--   groups, within its limits; the next token counts as a timed change.
-- Events: expire / dead for reclaimed leases, reserve for each job leased.
local now = now_ms()
local count, ttr_override, lease, waiter = tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[4], ARGV[5]
upkeep(now, math.min(math.max(count, PROMOTE_BATCH), PROMOTE_MAX))
if redis.call('EXISTS', K_PAUSED) == 1 then return {-1, 0} end

-- one lease token for this call: each (id, token) pair is one reservation
local out, records, leased, n = {-1, 0, lease}, {}, {}, 0
local flow = flow_on()
if flow then n = flow_lease(count, ttr_override, lease, now, out, records, leased) end
-- Lease the best `count` ready jobs. A member is stale when its record is gone,
-- not pending, or of another put (its seq differs: a put run twice leaves
-- one): it is dropped, and the next members are read in its place (a few rounds
-- at most, each bounded by `count`).
for _ = 1, flow and 0 or STALE_ROUNDS do
  local members = redis.call('ZRANGE', K_READY, 0, count - n - 1)
  if #members == 0 then break end
  local ids = {}
  for i, member in ipairs(members) do ids[i] = string.sub(member, 7) end
  local raws, stale = jobs_raw(ids), false
  for i, id in ipairs(ids) do
    local raw = raws[i]
    local sf, due, prio, _, seq
    if raw then sf, due, prio, _, seq = struct.unpack(HEAD, raw) end
    if raw and sf < 32 and seq == struct.unpack('>i6', members[i]) then
      n = n + 1
      local ttr = ttr_override
      if ttr <= 0 then
        ttr = DEFAULT_TTR
        if bit.band(sf, F_TTR) ~= 0 then ttr = struct.unpack('>I6', raw, 22) end
      end
      local record, att = lease_record(raw, now + ttr, lease)
      records[2 * n - 1], records[2 * n] = id, record
      leased[2 * n - 1], leased[2 * n] = now + ttr, id
      emit_event('reserve', id, att, due, prio) -- no group: not under flow control
      out[2 * n + 2], out[2 * n + 3] = id, record
    else
      stale = true
    end
  end
  call_chunked('ZREM', K_READY, members)
  if not stale or n >= count then break end
end

if n > 0 then
  jobs_put(records)
  zadd_many(K_LEASED, leased)
  if waiter ~= '' then hand_over_timer(waiter) end -- busy with jobs: another waiter times the next
  -- more is ready: pass the baton to one more waiting consumer
  if redis.call('ZCARD', flow and K_READY .. '>t' or K_READY) > 0 then wake(1) end
  return out
end

-- nothing leased: when to look again
if flow then
  -- groups that may be served but were not: the topic's limit holds them (a
  -- token: timed below; a free lease slot: woken by the lease's end)
elseif redis.call('ZCARD', K_READY) > 0 then
  return {0, 0} -- more stale members than rounds
end
redis.call('DEL', K_WAKE) -- nothing can be served: every token is stale
local next_at = nil
local d = redis.call('ZRANGE', K_DELAYED, 0, 0, 'WITHSCORES')[2]
local l = redis.call('ZRANGE', K_LEASED, 0, 0, 'WITHSCORES')[2]
if d then next_at = tonumber(d) end
if l and (not next_at or tonumber(l) < next_at) then next_at = tonumber(l) end
local f = far_next_at(now) -- now while a far bucket is being promoted: call again at once
if f and (not next_at or f < next_at) then next_at = f end
local token = flow and flow_next_at(now) -- a limit's next token
if token and (not next_at or token < next_at) then next_at = token end
if not next_at then return {-1, 0} end
local wake_in = math.max(next_at * 1000 - NOW_US, 0)
if waiter == '' then return {wake_in, 0} end
-- one waiter per shard times the next change, the others sleep on the wake list:
-- no herd of consumers calling at the same due time
local at, who, backup = timer_holder()
if who and who ~= waiter and at <= next_at and at >= now then -- a holder not yet due
  -- one waiter, the backup, wakes when the timer would lapse (the holder died
  -- or froze); the others sleep until woken, or BACKUP_SLACK later: no herd
  -- of consumers at each lapse
  local lapse = math.max(redis.call('PTTL', K_TIMER), 0)
  if backup == '' then
    redis.call('SET', K_TIMER, at .. ':' .. who .. ':' .. waiter, 'KEEPTTL')
  elseif backup ~= waiter then
    lapse = lapse + BACKUP_SLACK
  end
  return {lapse * 1000, 0}
end
redis.call('SET', K_TIMER, next_at .. ':' .. waiter, 'PX', math.max(next_at - now, 0) + TIMER_LEASE)
-- a new timer: wake one other waiter, which learns when it would lapse and
-- takes over if this one dies. Without this, a waiter asleep since before
-- there was anything to time (a lease just taken) sleeps through its due time.
if not who then wake(1) end
return {wake_in, 1}
