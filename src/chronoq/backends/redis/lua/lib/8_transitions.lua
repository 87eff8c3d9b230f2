-- lib/8_transitions.lua: the moves that several functions share: a job into or out
-- of its state's index, to dead, a lapsed lease back to ready, gone.
-- Defines: index_pending, place_pending, unindex, kill, expire, current, remove, lease_of.
-- Uses: K_DELAYED, K_READY, K_LEASED, K_DEAD, K_FORGET (1_keys); the states,
--   pack_job, ready_member, ready_score, group_of (2_record); emit (3_events); wake
--   (4_batched); load_job, job_put, jobs_del (5_jobs); ready_add_one, ready_rem,
--   lease_ended (6_flow); far_bucket, far_locate,
--   far_remove, far_add, far_flush (7_far).
-- Python twin: chronoq.states: lease_expired_error (the error expire writes),
--   observed_state (what a reader sees of a lease that lapsed before expire ran).

-- A pending job goes in delayed or ready by its due time.
local function index_pending(id, j, now)
  if j.due > now then
    redis.call('ZADD', K_DELAYED, j.due, id)
  else
    ready_add_one(ready_score(j.prio, j.due), ready_member(j, id), j.payload)
  end
end

-- A pending job's record written where it belongs: near (the jobs hash, then
-- delayed or ready), or far when its due time is beyond the horizon (its
-- near record, if any, removed).
local function place_pending(id, j, now)
  local start = far_bucket(j.due, now)
  if start then
    jobs_del({id})
    far_add(id, pack_job(j), start, j.seq)
    far_flush()
  else
    job_put(id, pack_job(j))
    index_pending(id, j, now)
  end
end

-- Take a job out of whatever index holds it (a near record stays; a far job
-- leaves the far tier).
local function unindex(id, j)
  if j.far then
    far_remove(j.far, id)
    j.far = nil
  elseif j.state == PENDING then
    redis.call('ZREM', K_DELAYED, id)
    ready_rem(ready_member(j, id), j.payload)
  elseif j.state == RESERVED then
    redis.call('ZREM', K_LEASED, id)
    lease_ended(group_of(j.payload))
  elseif j.state == DEAD then
    redis.call('ZREM', K_DEAD, id)
  elseif j.state == REMEMBERED then
    redis.call('ZREM', K_FORGET, id)
  end
end

local function kill(id, j, now, kind, err)
  if err and err ~= '' then j.err = err end
  j.state, j.at, j.lease = DEAD, now, ''
  job_put(id, pack_job(j))
  redis.call('ZADD', K_DEAD, now, id)
  emit(kind, id, j, err)
end

-- A lease that ran out: back to ready, or dead when attempts are used up.
-- Returns 1 when the job became ready.
local function expire(id, j, now)
  redis.call('ZREM', K_LEASED, id)
  lease_ended(group_of(j.payload))
  if j.att >= j.max then
    kill(id, j, now, 'dead', 'lease expired on attempt ' .. j.att .. ' of ' .. j.max)
    return 0
  end
  j.state, j.at, j.lease = PENDING, j.due, ''
  job_put(id, pack_job(j))
  ready_add_one(ready_score(j.prio, j.due), ready_member(j, id), j.payload)
  emit('expire', id, j)
  return 1
end

-- The job as a by-id operation must see it: an expired lease is applied now,
-- and a remembered id whose time is over is forgotten.
local function current(id, now)
  local j = load_job(id)
  if not j then
    local loc, raw = far_locate(id)
    if not loc then return nil end
    j = unpack_job(raw)
    j.far = loc
    return j
  end
  if j.state == RESERVED and j.at <= now then
    if expire(id, j, now) == 1 then wake(1) end
  elseif j.state == REMEMBERED and j.at <= now then
    jobs_del({id})
    redis.call('ZREM', K_FORGET, id)
    return nil
  end
  return j
end

-- Gone: acked or deleted. Keeps the id for unique_for, else removes the record.
local function remove(id, j, now)
  unindex(id, j)
  if j.uf > 0 then
    j.state, j.at, j.lease, j.err, j.payload = REMEMBERED, now + j.uf, '', '', ''
    job_put(id, pack_job(j))
    redis.call('ZADD', K_FORGET, j.at, id)
  else
    jobs_del({id})
  end
end

-- The job under `lease` while that lease holds, else nil.
local function lease_of(id, lease, now)
  local j = load_job(id)
  if not j or j.state ~= RESERVED or j.lease ~= lease or j.at <= now then return nil end
  return j
end
