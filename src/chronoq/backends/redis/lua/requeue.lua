-- requeue: dead jobs back to ready now, attempts reset to 0.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] limit (when no ids are given), then the ids (none: the oldest dead)
-- Returns: how many jobs moved.
-- Events: requeue, for each.
local now = now_ms()
upkeep(now)
local ids = {}
if #ARGV > 2 then
  for b = 3, #ARGV do ids[#ids + 1] = ARGV[b] end
else
  ids = redis.call('ZRANGE', K_DEAD, 0, tonumber(ARGV[2]) - 1)
end
local moved = 0
for _, id in ipairs(ids) do
  local j = current(id, now)
  if j and j.state == DEAD then
    redis.call('ZREM', K_DEAD, id)
    j.state, j.att, j.due, j.at, j.lease = PENDING, 0, now, now, ''
    place_pending(id, j, now)
    emit('requeue', id, j)
    moved = moved + 1
  end
end
wake(moved)
return moved
