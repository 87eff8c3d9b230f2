-- forecast: how many delayed jobs of the shard fall due per step (no write).
-- KEYS: the shard keys (see lib/1_keys.lua); only `delayed` and the far tier's
--   bucket counts (lib/7_far.lua) are read, never a record.
-- ARGV: [1] event cap, [2] until (ms), [3] step (ms), [4] the most steps,
--   [5] start (ms), or -1 for now by this server's clock: a forecast's first shard
--   picks it and the others are given it, so that every shard's steps line up.
-- Returns: {start, later, count of step 1, count of step 2, ...}: step i (from 1)
--   counts the jobs due in [start + (i-1)*step, start + i*step), the first one
--   without start itself (a job due by then is ready, as stats.lua counts it);
--   trailing zero counts are left out. later: the jobs due from start + steps*step
--   on. Only {start} when until is not after start or is over the most steps away:
--   the client raises InvalidInput (job.forecast_steps, which this mirrors).
-- Events: none.

-- The far jobs per step of a forecast: out[k] (k from 1) gains the count of each
-- bucket starting in (start - FAR_WIDTH, finish), in the step that holds its
-- start (the first for a bucket that began before start). Returns how many.
local function far_forecast(out, start, step, finish)
  far_check() -- the bound below is in the store's width
  local counted = 0
  far_counts(start - FAR_WIDTH, finish, function(index, c)
    local k = math.max(math.floor((index * FAR_WIDTH - start) / step), 0) + 1
    out[k] = (out[k] or 0) + c
    counted = counted + c
  end)
  return counted
end

local start = tonumber(ARGV[5])
if start < 0 then start = now_ms() end
local until_ms, step = tonumber(ARGV[2]), tonumber(ARGV[3])
local span = until_ms - start
if span <= 0 then return {start} end
-- ceil(span / step), exact: a quotient of doubles may round onto a whole number
local steps = math.floor(span / step)
while steps * step < span do steps = steps + 1 end
while steps > 1 and (steps - 1) * step >= span do steps = steps - 1 end
if steps > tonumber(ARGV[4]) then return {start} end
local finish = start + steps * step

-- the near structures: one ZCOUNT (O(log n)) per step, until every job due
-- before finish is counted
local out = {start, redis.call('ZCOUNT', K_DELAYED, istr(finish), '+inf')}
local left = redis.call('ZCOUNT', K_DELAYED, '(' .. istr(start), '(' .. istr(finish))
local low = '(' .. istr(start)
local i = 0
while left > 0 do
  i = i + 1
  local high = istr(start + i * step)
  local n = redis.call('ZCOUNT', K_DELAYED, low, '(' .. high)
  out[i + 2] = n
  left = left - n
  low = high
end

-- the far tier: a bucket's count goes to the step that holds its start (so a
-- far job may be counted up to a bucket's width early, never late); buckets
-- wholly due by start count as ready, as in stats.lua
local all, due = far_due_count(start)
if all == 0 then return out end
local steps_out = {}
local counted = far_forecast(steps_out, start, step, finish)
for k, c in pairs(steps_out) do
  for fill = #out - 1, k - 1 do out[fill + 2] = out[fill + 2] or 0 end
  out[k + 2] = (out[k + 2] or 0) + c
end
out[2] = out[2] + all - due - counted
return out
