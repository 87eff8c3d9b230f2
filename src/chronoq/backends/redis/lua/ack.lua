-- ack: finish reserved jobs; they are gone (kept as remembered ids for unique_for).
-- KEYS: the shard keys (see prelude).
-- ARGV: [1] event cap, then pairs: id, lease
-- Returns: the ids whose lease was lost (expired, reserved again, or gone).
-- Events: ack, for each job acked.
local now = now_ms()
local lost = {}
for b = 2, #ARGV, 2 do
  local id = ARGV[b]
  local j = lease_of(id, ARGV[b + 1], now)
  if j then
    remove(id, j, now)
    emit('ack', id, j, nil, nil)
  else
    lost[#lost + 1] = id
  end
end
return lost
