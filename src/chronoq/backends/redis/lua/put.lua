-- put: create jobs, deduplicated on id (docs/contract.md §1 "put").
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] replace (1/0), followed by 'g' when a job of the call has a
--   group (the shard is then under flow control from before its jobs: lib/6_flow.lua),
--   then one value per job: a packed
--   '>Bi8i8hBI2' head (generated 1/0, delay_ms, run_at_ms or -1, priority, flags,
--   id length), the id, then the rest of the record as the client packed it:
--   the optional fields that `flags` names (F_TTR, F_MAX, F_UF), then the payload.
--   A generated id (a fresh ULID) cannot exist yet: its lookup is skipped.
--   A job due beyond the horizon goes to the far tier (lib/7_far.lua).
-- Returns: 2 values per job: created (1/0), due_at (ms; the existing job's when not created).
-- Events: put, for each job created.
local now = now_ms()
local replace = string.sub(ARGV[2], 1, 1) == '1'
local grouped = string.sub(ARGV[2], 2) == 'g'
if grouped then flow_enable() end
local count = #ARGV - 2
local seq = redis.call('INCRBY', K_SEQ, istr(count)) - count
local out, ready, earliest = {}, 0, nil
local first_delayed = redis.call('ZRANGE', K_DELAYED, '0', '0', 'WITHSCORES')[2]
-- the writes of new jobs, sent as few variadic commands
local records, delayed, readies, ready_raws, batch = {}, {}, {}, {}, {}
local events = EVENTS

local first_far, far_added = nil, false

local function write_batch(last)
  jobs_put(records)
  if #delayed > 0 then zadd_many(K_DELAYED, delayed) end
  ready_add(readies, ready_raws)
  if far_added then far_flush() end
  if not last then records, delayed, readies, ready_raws, batch = {}, {}, {}, {}, {} end
end

for n = 3, #ARGV do
  local arg = ARGV[n]
  local generated, delay, run_at, prio, flags, idlen, pos = struct.unpack('>Bi8i8hBI2', arg)
  local id = string.sub(arg, pos, pos + idlen - 1)
  local prior = nil
  if generated == 0 then
    if batch[id] then write_batch() end -- the same id twice in one call: the second sees the first
    prior = current(id, now)
  end
  if prior and (not replace or prior.state == RESERVED) then
    out[#out + 1], out[#out + 2] = 0, prior.due
  else
    local prior_near = prior and not prior.far
    if prior then unindex(id, prior) end
    local due = now + delay
    if run_at >= 0 then due = math.max(run_at, now) end
    seq = seq + 1
    local record = struct.pack('>BI6hi6i6c0', PENDING * 32 + flags, due, prio, now, seq,
                               string.sub(arg, pos + idlen))
    if generated == 0 then batch[id] = true end
    local start = far_bucket(due, now)
    if start then
      if prior_near then jobs_del({id}) end
      if not far_added then
        first_far, far_added = redis.call('ZRANGE', K_FAR, 0, 0)[1], true
      end
      far_add(id, record, start, seq)
    else
      local r = #records
      records[r + 1], records[r + 2] = id, record
    end
    if start then -- counted in the far tier, timed by its bucket
    elseif due > now then
      delayed[#delayed + 1], delayed[#delayed + 2] = istr(due), id
      if not earliest or due < earliest then earliest = due end
    else
      readies[#readies + 1], readies[#readies + 2] = ready_score(prio, due), struct.pack('>i6c0', seq, id)
      ready_raws[#ready_raws + 1] = record
      ready = ready + 1
    end
    local g = grouped and group_of_raw(record) or '' -- only a call told 'g' has a group
    if generated == 1 and g == '' and due - now <= 2147483647 then -- its event, directly
      events[#events + 1] = pack_event(PUT_ULID, string.sub(id, 2), 0, due - now, prio)
    else
      emit_event('put', id, 0, due, prio, nil, g)
    end
    out[#out + 1], out[#out + 2] = 1, due
  end
end
write_batch(true)
-- wake a consumer per ready job, and one to re-time its sleep for an earlier due
-- job or an earlier far bucket (whose promotion the timer holder times)
if earliest and (not first_delayed or earliest < tonumber(first_delayed)) then ready = ready + 1 end
if far_added and redis.call('ZRANGE', K_FAR, 0, 0)[1] ~= first_far then ready = ready + 1 end
wake(ready)
return out
