-- ack: finish reserved jobs; they are gone (kept as remembered ids for unique_for).
-- KEYS: the shard keys (see prelude).
-- ARGV: [1] event cap, then pairs: id, lease
-- Returns: the ids whose lease was lost (expired, reserved again, or gone).
-- Events: ack, for each job acked.
local now = now_ms()
local lost, gone, seen = {}, {}, {}
for b = 2, #ARGV, 2 do
  local id = ARGV[b]
  local j = lease_of(id, ARGV[b + 1], now)
  if j and not seen[id] then -- the same lease twice in one call: the second is lost
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
call_chunked('HDEL', K_JOBS, gone)
return lost
