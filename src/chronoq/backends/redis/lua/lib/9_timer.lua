-- lib/9_timer.lua: what the reserve path does besides leasing: the bounded upkeep
-- of the shard, and the shard's timer (KEYS[12]: which waiting consumer times the
-- shard's next change; reserve.lua takes it, handover.lua hands it on).
-- Defines: TIMER_LEASE, BACKUP_SLACK, EXPIRE_BATCH, PROMOTE_BATCH, PROMOTE_MAX, STALE_ROUNDS,
--   timer_holder, hand_over_timer (the hand-over), upkeep.
-- Uses: K_DELAYED, K_READY, K_LEASED, K_FORGET, K_TIMER (1_keys); the states,
--   HEAD, state_of, unpack_job, ready_score (2_record); call_chunked, wake (4_batched);
--   jobs_raw, jobs_del (5_jobs); ready_add (6_flow); far_promote, FAR_SLICE (7_far);
--   expire (8_transitions).
-- Python twin: none; core.py keeps which shards' timers a waiter holds (reserve's
--   reply) and calls handover for them when it stops waiting.

local TIMER_LEASE = 50 -- ms: how late due jobs can be when the timing waiter died (or froze)
-- upkeep per call: small enough that a reserve stays well under 1 ms of server time
local EXPIRE_BATCH = 25
local PROMOTE_BATCH = 50 -- reserve(count) promotes up to count, at most PROMOTE_MAX
local PROMOTE_MAX = 1000
local STALE_ROUNDS = 4 -- reserve reads past stale ready members this many times at most

-- how much later than the backup the other sleeping waiters look, should the
-- holder and its backup both have stopped
local BACKUP_SLACK = 2000

-- The shard's timer: which waiter times its next change, for which due time,
-- and which one waiter (the backup, '' until one is named) times its lapse.
local function timer_holder()
  local held = redis.call('GET', K_TIMER)
  if not held then return nil, nil, nil end
  local at, who, backup = string.match(held, '^(%d+):([^:]*):?(.*)$')
  return tonumber(at), who, backup
end

-- The hand-over: `waiter` stops timing the shard (if it did): another waiter is
-- woken to take over. Returns true when it held the timer.
local function hand_over_timer(waiter)
  local _, who = timer_holder()
  if who ~= waiter then return false end
  redis.call('DEL', K_TIMER)
  wake(1)
  return true
end

-- Bounded upkeep on the reserve path: promote a slice of the far tier when its
-- first bucket's time has come, reclaim expired leases, promote due jobs, forget
-- remembered ids whose time is over. Returns how many became ready.
local function upkeep(now, promote)
  local made = far_promote(now, FAR_SLICE)
  -- an index entry whose record is gone or in another state is stale (a call
  -- that failed half-way, a put run twice): it is dropped, never acted on
  local expired = redis.call('ZRANGEBYSCORE', K_LEASED, '-inf', now, 'LIMIT', 0, EXPIRE_BATCH)
  local raws = jobs_raw(expired)
  for i, id in ipairs(expired) do
    if raws[i] and state_of(raws[i]) == RESERVED then
      made = made + expire(id, unpack_job(raws[i]), now)
    else
      redis.call('ZREM', K_LEASED, id)
    end
  end
  local due = redis.call('ZRANGEBYSCORE', K_DELAYED, '-inf', now, 'LIMIT', 0,
                        promote or PROMOTE_BATCH)
  local adds, added = {}, {}
  raws = jobs_raw(due)
  for i, id in ipairs(due) do
    if raws[i] and state_of(raws[i]) == PENDING then
      local _, at, prio, _, seq = struct.unpack(HEAD, raws[i])
      adds[#adds + 1], adds[#adds + 2] = ready_score(prio, at), struct.pack('>i6', seq) .. id
      added[#added + 1] = raws[i]
    end
  end
  ready_add(adds, added)
  call_chunked('ZREM', K_DELAYED, due)
  made = made + #adds / 2
  local forgotten = redis.call('ZRANGEBYSCORE', K_FORGET, '-inf', now, 'LIMIT', 0, PROMOTE_BATCH)
  local gone = {}
  raws = jobs_raw(forgotten)
  for i, id in ipairs(forgotten) do
    if raws[i] and state_of(raws[i]) == REMEMBERED then gone[#gone + 1] = id end
  end
  jobs_del(gone)
  call_chunked('ZREM', K_FORGET, forgotten)
  return made
end
