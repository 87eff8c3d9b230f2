-- far_jobs: a page of the shard's far jobs, for the jobs listing (logs.py; no write).
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] bucket start, [3] page, [4] index (a cursor: see
--   far_entries below; 0 0 0 at first), [5] limit
-- Returns: {now, next cursor as {start, page, index} or false at the end, then
--   2 values per job: id, record}.
-- Events: none.

-- About `limit` far jobs from the cursor on (bucket start, page, index counted
-- from the page's first element ever): a flat list of id, record pairs, and the
-- cursor after them (nil at the end). At most about 4 * limit elements are
-- read, emptied ones (deleted jobs) included: a page of them may come back
-- short, or empty, with a cursor.
local function far_entries(start, page, index, limit)
  far_check()
  local out, budget = {}, 4 * limit + FAR_PAGES
  if page >= FAR_PAGES then start, page, index = start + 1, 0, 0 end -- a cursor made by hand
  while #out < 2 * limit and budget > 0 do
    local buckets = redis.call('ZRANGEBYSCORE', K_FAR, start, '+inf', 'LIMIT', 0, 1)
    if #buckets == 0 then return out, nil end
    if tonumber(buckets[1]) ~= start then start, page, index = tonumber(buckets[1]), 0, 0 end
    local key = far_page_key(start, page)
    local trimmed = page_trimmed(start, page)
    local first = math.max(index - trimmed, 0)
    local part = redis.call('LRANGE', key, first, first + math.min(limit - #out / 2, budget) - 1)
    budget = budget - #part - 1
    for _, e in ipairs(part) do
      local id, raw = far_entry_parts(e, start)
      if id then out[#out + 1], out[#out + 2] = id, raw end
    end
    index = trimmed + first + #part
    if first + #part >= redis.call('LLEN', key) then
      page, index = page + 1, 0
      if page == FAR_PAGES then start, page = start + 1, 0 end
    end
  end
  return out, {start, page, index}
end

local jobs, after = far_entries(tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
                                tonumber(ARGV[5]))
local out = {now_ms(), after or false}
for i = 1, #jobs do out[i + 2] = jobs[i] end
return out
