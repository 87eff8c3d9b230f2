-- lib/5_jobs.lua: the jobs hash (KEYS[1]). Every access to it goes through these.
-- Defines: job_raw, jobs_raw, load_job (reads); job_put, jobs_put, jobs_del (writes).
-- Uses: K_JOBS (1_keys), unpack_job (2_record), CHUNK and call_chunked (4_batched).
-- Python twin: none (Python reads records from replies: codec._record, leased_fields).

local function job_raw(id) return redis.call('HGET', K_JOBS, id) end

-- The records of `ids`, in order (false where there is none).
local function jobs_raw(ids)
  if #ids <= CHUNK then
    if #ids == 0 then return {} end
    return redis.call('HMGET', K_JOBS, unpack(ids))
  end
  local out = {}
  for first = 1, #ids, CHUNK do
    local part = redis.call('HMGET', K_JOBS, unpack(ids, first, math.min(first + CHUNK - 1, #ids)))
    for i = 1, #part do out[#out + 1] = part[i] end
  end
  return out
end

local function load_job(id)
  local raw = job_raw(id)
  if not raw then return nil end
  return unpack_job(raw)
end

local function job_put(id, raw) redis.call('HSET', K_JOBS, id, raw) end
local function jobs_put(list) call_chunked('HSET', K_JOBS, list) end -- id/record pairs
local function jobs_del(ids) call_chunked('HDEL', K_JOBS, ids) end
