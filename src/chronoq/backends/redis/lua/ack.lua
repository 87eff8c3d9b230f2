-- ack: finish reserved jobs; they are gone (kept as remembered ids for unique_for).
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, then pairs: id, lease
-- Returns: the ids whose lease was lost (expired, reserved again, or gone).
-- Events: ack, for each job acked.
local now = now_ms()
local lost, gone, seen, ids, ended = {}, {}, {}, {}, {}
for b = 2, #ARGV, 2 do ids[#ids + 1] = ARGV[b] end
local raws = jobs_raw(ids)
for i, id in ipairs(ids) do
  local raw, at, lease, att, due, prio, uf = raws[i], nil, nil, nil, nil, nil, nil
  if raw then at, lease, att, due, prio, uf = lease_view(raw) end
  -- the same lease twice in one call: the second is lost
  if at and at > now and lease == ARGV[2 * i + 1] and not seen[id] then
    seen[id] = true
    -- a job with a group is on a shard under flow control (put.lua): no parse elsewhere
    local g = flow_on() and group_of_raw(raw) or ''
    if uf > 0 then
      remove(id, unpack_job(raw), now) -- remembered for unique_for: its own writes
    else
      gone[#gone + 1] = id
      if flow_on() and flow_flags() ~= '' then ended[g] = (ended[g] or 0) + 1 end
    end
    emit_event('ack', id, att, due, prio, nil, g)
  else
    lost[#lost + 1] = id
  end
end
call_chunked('ZREM', K_LEASED, gone)
jobs_del(gone)
if next(ended) then leases_ended(ended) end
return lost
