-- purge: delete up to about `limit` jobs of the shard, near then far (a slice of
-- a far bucket at a time); call again until it returns -1.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] limit
-- Returns: how many jobs this call deleted (remembered ids are dropped too and not
--   counted), or -1 once the shard holds nothing.
-- Events: delete (error 'purged'), for each job.
now_ms() -- the time its events carry
local limit = tonumber(ARGV[2])
local deleted, seen, cursor = 0, 0, '0'
repeat -- HSCAN may return an empty page of a sparse hash: follow the cursor
  local page = redis.call('HSCAN', K_JOBS, cursor, 'COUNT', limit)
  cursor = page[1]
  for i = 1, #page[2], 2 do
    local id = page[2][i]
    local j = unpack_job(page[2][i + 1])
    unindex(id, j)
    jobs_del({id})
    if j.state ~= REMEMBERED then
      emit('delete', id, j, 'purged')
      deleted = deleted + 1
    end
    seen = seen + 1
  end
until cursor == '0' or seen >= limit
-- then the far tier: a slice off the head of a bucket's pages at a time, as
-- promotion takes it (far_take), so that a bucket of a million jobs takes many calls
far_check()
while seen < limit do
  local first = redis.call('ZRANGE', K_FAR, 0, 0)[1]
  if not first then break end
  seen = seen + far_take(tonumber(first), limit - seen, function(id, raw)
    emit('delete', id, unpack_job(raw), 'purged')
    deleted = deleted + 1
  end)
end
if redis.call('HLEN', K_JOBS) == 0 and redis.call('EXISTS', K_FAR) == 0 then
  redis.call('DEL', K_DELAYED, K_READY, K_LEASED, K_DEAD, K_FORGET, K_WAKE, K_FARN, K_FARIDX)
  if flow_on() then -- the groups' state goes; the limits and paused groups stay
    local fk_ = K_READY .. '>'
    redis.call('DEL', fk_ .. 'n', fk_ .. 'b', fk_ .. 'k', fk_ .. 't', fk_ .. 'w', fk_ .. 's',
               fk_ .. 'l')
    redis.call('HDEL', fk_ .. 'f', 'queued', 'leased', 'tokens', 'since', 'swept')
  end
  if deleted == 0 then return -1 end
end
return deleted
