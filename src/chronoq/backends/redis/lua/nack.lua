-- nack: give a reserved job back to run later, or to dead when attempts are used up.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] id, [3] lease, [4] delay_ms (-1: backoff), [5] error,
--   [6] backoff base ms, [7] backoff factor, [8] backoff cap ms, [9] jitter in [0, 1),
--   [10] '1' to release: the consumer gives the job back without having run it to
--   the end (a worker shutting down): ready at once and never dead; its attempts
--   still count this reservation (attempts counts reservations, docs/contract.md §1)
-- Returns: the new state: 'delayed', 'ready' or 'dead'; or false when the lease was lost.
-- Events: nack, or dead when attempts are used up.
local now = now_ms()
local id = ARGV[2]
local j = lease_of(id, ARGV[3], now)
if not j then return false end
redis.call('ZREM', K_LEASED, id)
lease_ended(group_of(j.payload))
local release = ARGV[10] == '1'
if j.att >= j.max and not release then
  kill(id, j, now, 'dead', ARGV[5])
  return 'dead'
end
local delay = tonumber(ARGV[4])
if release then delay = 0 end
if delay < 0 then
  -- the same formula as chronoq.backoff.Backoff.delay_ms
  local nominal = tonumber(ARGV[6]) * tonumber(ARGV[7]) ^ (j.att - 1)
  nominal = math.floor(math.min(nominal, tonumber(ARGV[8])) + 0.5)
  local half = math.floor(nominal / 2)
  delay = half + math.floor(tonumber(ARGV[9]) * (nominal - half) + 0.5)
end
if ARGV[5] ~= '' then j.err = ARGV[5] end
j.state, j.lease, j.due = PENDING, '', now + delay
j.at = j.due
place_pending(id, j, now)
emit('nack', id, j, ARGV[5])
wake(1)
if delay > 0 then return 'delayed' end
return 'ready'
