-- ack: finish reserved jobs; they are gone (kept as remembered ids for unique_for).
-- KEYS: the shard keys (see prelude).
-- ARGV: [1] event cap, then pairs: id, lease
-- Returns: the ids whose lease was lost (expired, reserved again, or gone).
-- Events: ack, for each job acked.
local now = now_ms()
local lost, gone, seen, ids = {}, {}, {}, {}
for b = 2, #ARGV, 2 do ids[#ids + 1] = ARGV[b] end
local raws = jobs_raw(ids)
for i, id in ipairs(ids) do
  local raw = raws[i]
  local j = raw and unpack_job(raw)
  -- the same lease twice in one call: the second is lost
  if j and j.state == RESERVED and j.lease == ARGV[2 * i + 1] and j.at > now and not seen[id] then
    seen[id] = true
    if j.uf > 0 then
      remove(id, j, now) -- remembered for unique_for: its own writes
    else
      gone[#gone + 1] = id
    end
    emit('ack', id, j)
  else
    lost[#lost + 1] = id
  end
end
call_chunked('ZREM', K_LEASED, gone)
jobs_del(gone)
return lost
