-- lib/7_far.lua: the far tier. A pending job due later than the horizon is not a jobs
-- hash field and a delayed member (~250 bytes besides its record) but an element of a
-- page (a LIST) of its time bucket. A bucket is promoted into the near structures from
-- the horizon before its start, a slice per call of the reserve path (never long).
-- Defines: FAR_PAGES, FAR_SLICE, far_check, far_bucket, far_page_key, page_trimmed,
--   far_element, far_entry_parts, far_locate, drop_bucket, far_count, far_remove, far_add,
--   far_flush, far_take, far_promote, far_next_at, far_counts, far_due_count.
-- Uses: K_DELAYED, K_READY, K_FAR, K_FARN, K_FARIDX, FAR_HORIZON, FAR_WIDTH, FAR_CHECKED,
--   CALL_NO, istr (1_keys); HEAD, ready_score (2_record); CHUNK, zadd_many, call_chunked
--   (4_batched); jobs_put (5_jobs); ready_add (6_flow).
-- Python twin: far_ids.py (the bucket a generated id names).
--
-- Bucket <start> (ms, a multiple of FAR_WIDTH) holds the jobs due in [start,
-- start + FAR_WIDTH): a member of KEYS[14] scored by its start, its count a field
-- of a count string (count_at); KEYS[15] holds the tier's count ('all') and per
-- page ('<start>:<page>') the elements taken off its head, so that a listing's
-- cursor survives. Its jobs are in FAR_PAGES lists <far>:<start>:<page>, one
-- element each (far_element): a byte of flags, the id, the record (2_record).
-- A deleted or moved job's element becomes '' in place (no index shifts under a
-- listing) until taken off. Flags: E_INDEXED, the id is in the index;
-- E_SHORT_ID, a generated id that names this bucket, kept as its 13 bytes from
-- the second to the fourteenth (the first is 0, the last three the bucket's
-- number), else the id's length - 1 in a byte, then the id; E_SHORT_DUE, the
-- due time kept as 2 bytes from the bucket's start (buckets up to 65,536 ms).
--
-- Finding a job by id reads one page: a generated id (far_ids.py) carries its
-- bucket number (mod 2^24) in its last 24 bits and its page in bits 28-31; any
-- other id, or one naming another bucket, is in the index (KEYS[16]: id ->
-- start * FAR_PAGES + page ':' its place, counted from the page's first element).

local FAR_PAGES = 16
local FAR_SLICE = 256 -- jobs per promotion step: well under 1 ms of server time
local READ_CHUNK = 512 -- elements per LRANGE when a page is searched
local HINT_SPAN = 16777216 -- 2^24
local GROUP = 64 -- bucket counts per count string

-- The store's bucket width (kept in farn while the tier holds jobs), read once
-- per call before the tier is: a process given another far_bucket_ms follows
-- it rather than misread the buckets and short ids.
local function far_check()
  if FAR_CHECKED then return end
  FAR_CHECKED = true
  local width = redis.call('HGET', K_FARN, 'width')
  if width then FAR_WIDTH = tonumber(width) end
end

-- The start of the bucket a job due at `due` is kept in, or nil when it is near:
-- a bucket is far while its promotion (the horizon before its start) is ahead.
local function far_bucket(due, now)
  if FAR_HORIZON < 0 or due - now <= FAR_HORIZON then return nil end -- near at any width
  far_check()
  local start = due - due % FAR_WIDTH
  if start - FAR_HORIZON > now then return start end
  return nil
end

local function far_page_key(start, page) return K_FAR .. ':' .. istr(start) .. ':' .. page end

-- The farn field that counts the elements taken off a page's head (promotion,
-- purge), and that count: a page's elements are numbered from its first ever.
local function trimmed_field(start, page) return istr(start) .. ':' .. page end
local function page_trimmed(start, page)
  return tonumber(redis.call('HGET', K_FARN, trimmed_field(start, page)) or '0')
end

-- The bucket and page a generated id names (see far_ids.py), or nil.
local function hinted(id)
  if #id ~= 17 or string.byte(id, 1) ~= 0 then return nil end
  local created, low = struct.unpack('>I6', id, 2), struct.unpack('>I4', id, 14)
  local c = math.floor(created / FAR_WIDTH)
  -- the page: bits 28-31, so that 16 ids one process makes in a row share one
  return (c + (low % HINT_SPAN - c) % HINT_SPAN) * FAR_WIDTH, math.floor(low / 268435456)
end

local E_INDEXED, E_SHORT_ID, E_SHORT_DUE = 1, 2, 4

-- The last three bytes of a generated id that names bucket `start`.
local function bucket_tail(start) return struct.pack('>I3', (start / FAR_WIDTH) % HINT_SPAN) end

-- The element of job `id` (record `raw`) in bucket `start`; `flags`: E_INDEXED
-- or E_SHORT_ID (far_locate finds no other).
local function far_element(id, raw, start, flags)
  local head = string.char(#id - 1) .. id
  if flags == E_SHORT_ID then head = string.sub(id, 2, 14) end
  if FAR_WIDTH > 65536 then return string.char(flags) .. head .. raw end
  local due = struct.unpack('>I6', raw, 2)
  return string.char(flags + E_SHORT_DUE) .. head .. string.sub(raw, 1, 1)
    .. struct.pack('>I2', due - start) .. string.sub(raw, 8)
end

-- An element's id, record and whether its id is in the index; nil for ''.
local function far_entry_parts(e, start)
  if e == '' then return nil end
  local flags = string.byte(e, 1)
  local id, at
  if bit.band(flags, E_SHORT_ID) ~= 0 then
    id, at = '\0' .. string.sub(e, 2, 14) .. bucket_tail(start), 15
  else
    local n = string.byte(e, 2)
    id, at = string.sub(e, 3, n + 3), n + 4
  end
  local raw
  if bit.band(flags, E_SHORT_DUE) ~= 0 then
    raw = string.sub(e, at, at) .. struct.pack('>I6', start + struct.unpack('>I2', e, at + 1))
      .. string.sub(e, at + 3)
  else
    raw = string.sub(e, at)
  end
  return id, raw, bit.band(flags, E_INDEXED) ~= 0
end

-- A far job by id: its location and record, or nil.
local function far_locate(id)
  far_check()
  local start, page, indexed, known
  local at = redis.call('HGET', K_FARIDX, id)
  if at then
    local loc, index = string.match(at, '^(%d+):?(%d*)$')
    page = tonumber(loc) % FAR_PAGES
    start, indexed, known = (tonumber(loc) - page) / FAR_PAGES, true, tonumber(index)
  else
    start, page = hinted(id)
    if not start then return nil end
  end
  local key = far_page_key(start, page)
  -- what the element holds after its flags, and those flags but E_SHORT_DUE
  local held, kind = string.char(#id - 1) .. id, E_INDEXED
  if not indexed then held, kind = string.sub(id, 2, 14), E_SHORT_ID end
  local function holds(e)
    return string.sub(e, 2, #held + 1) == held and string.byte(e, 1) % 4 == kind
  end
  if known then -- the index knows its place: counted from the page's first element ever
    local i = known - page_trimmed(start, page)
    local e = i >= 0 and redis.call('LINDEX', key, i)
    if e and holds(e) then
      local _, raw = far_entry_parts(e, start)
      return {start = start, key = key, index = i, indexed = true}, raw
    end
  end
  local first = 0 -- else the page is searched
  repeat
    local part = redis.call('LRANGE', key, first, first + READ_CHUNK - 1)
    for i, e in ipairs(part) do
      if holds(e) then
        local loc = {start = start, key = key, index = first + i - 1, indexed = indexed}
        local _, raw = far_entry_parts(e, start)
        return loc, raw
      end
    end
    first = first + READ_CHUNK
  until #part < READ_CHUNK
  return nil
end

-- A bucket's count: a signed 32-bit field of a STRING of GROUP fields, one per
-- bucket of a run of GROUP buckets (<far>c:<group>): the forecast reads a month
-- of minute buckets as ~700 strings of 256 bytes, not 43,200 hash fields.
local function count_key(group) return K_FAR .. 'c:' .. istr(group) end
local function count_at(start)
  local index = start / FAR_WIDTH
  return count_key(math.floor(index / GROUP)), '#' .. (index % GROUP)
end

-- Bucket `start` is empty: dropped, with its pages and bookkeeping.
local function drop_bucket(start)
  local field = istr(start)
  local key, at = count_at(start)
  local left = redis.call('BITFIELD_RO', key, 'GET', 'i32', at)[1]
  if left ~= 0 then
    redis.call('HINCRBY', K_FARN, 'all', -left)
    redis.call('BITFIELD', key, 'SET', 'i32', at, 0)
  end
  if not string.find(redis.call('GET', key) or '', '[^%z]') then redis.call('DEL', key) end
  local keys, fields = {}, {}
  for p = 0, FAR_PAGES - 1 do
    keys[#keys + 1] = far_page_key(start, p)
    fields[#fields + 1] = trimmed_field(start, p)
  end
  redis.call('UNLINK', unpack(keys))
  redis.call('HDEL', K_FARN, unpack(fields))
  redis.call('ZREM', K_FAR, field)
  if redis.call('EXISTS', K_FAR) == 0 then redis.call('DEL', K_FARN) end -- no counts left
end

-- Count `n` more (or fewer) jobs in bucket `start` (and in the tier's total,
-- unless the caller counts that itself); a bucket left empty is dropped.
local function far_count(start, n, untotalled)
  local key, at = count_at(start)
  if not untotalled then redis.call('HINCRBY', K_FARN, 'all', n) end
  local left = redis.call('BITFIELD', key, 'INCRBY', 'i32', at, n)[1]
  if left == n and n > 0 then redis.call('ZADD', K_FAR, start, istr(start)) end
  if left <= 0 then drop_bucket(start) end
end

-- Take the job at `loc` (far_locate) out of the far tier.
local function far_remove(loc, id)
  redis.call('LSET', loc.key, loc.index, '')
  if loc.indexed then redis.call('HDEL', K_FARIDX, id) end
  far_count(loc.start, -1)
end

-- Appends gathered by a call (put.lua adds many): page key -> elements, bucket
-- -> count, and the indexed jobs ({id, page key, start, page, place among the
-- page's new elements}); far_flush writes them.
-- Tagged with the call that gathered it: one that failed before flushing
-- must not leave its appends to the next call (on another shard's keys).
local function new_batch()
  return {pages = {}, order = {}, counts = {}, index = {}, call = CALL_NO}
end
local far_batch = new_batch()

local function far_add(id, raw, start, seq)
  if far_batch.call ~= CALL_NO then far_batch = new_batch() end
  local page, indexed = nil, false
  local hs, hp = hinted(id)
  -- an indexed job's page is free: 64 jobs put in a row share one (fewer appends)
  if hs == start then page = hp else page, indexed = math.floor(seq / 64) % FAR_PAGES, true end
  local flags = E_SHORT_ID
  if indexed then flags = E_INDEXED end
  local key = far_page_key(start, page)
  local elements = far_batch.pages[key]
  if not elements then
    elements = {}
    far_batch.pages[key] = elements
    far_batch.order[#far_batch.order + 1] = key
  end
  elements[#elements + 1] = far_element(id, raw, start, flags)
  far_batch.counts[start] = (far_batch.counts[start] or 0) + 1
  if indexed then
    local index = far_batch.index
    index[#index + 1] = {id, key, start, page, #elements}
  end
end

local function far_flush()
  if far_batch.call ~= CALL_NO then far_batch = new_batch() return end -- none of this call's
  if #far_batch.order > 0 then redis.call('HSETNX', K_FARN, 'width', istr(FAR_WIDTH)) end
  -- an indexed job's place, counted from its page's first element ever (as a
  -- listing's cursor), so that far_locate reads one element, not its page
  local pairs_at, base = {}, {}
  for _, e in ipairs(far_batch.index) do
    local id, key, start, page, n = e[1], e[2], e[3], e[4], e[5]
    if not base[key] then
      base[key] = redis.call('LLEN', key) + page_trimmed(start, page)
    end
    pairs_at[#pairs_at + 1] = id
    pairs_at[#pairs_at + 1] = istr(start * FAR_PAGES + page) .. ':' .. istr(base[key] + n - 1)
  end
  for _, key in ipairs(far_batch.order) do call_chunked('RPUSH', key, far_batch.pages[key]) end
  local total = 0
  for start, n in pairs(far_batch.counts) do
    far_count(start, n, true)
    total = total + n
  end
  if total > 0 then redis.call('HINCRBY', K_FARN, 'all', total) end
  if #pairs_at > 0 then call_chunked('HSET', K_FARIDX, pairs_at) end
  far_batch = new_batch()
end

-- The first bucket whose promotion is due, or nil.
local function promotable(now)
  local first = redis.call('ZRANGE', K_FAR, 0, 0, 'WITHSCORES')
  if #first == 0 then return nil end
  local start = tonumber(first[2])
  if start - math.max(FAR_HORIZON, 0) > now then return nil end
  far_check()
  return start
end

-- Take up to `budget` elements off the heads of bucket `start`'s pages (promotion,
-- purge), calling each(id, record) for every job among them: their index entries
-- go, the trimmed counts grow, the bucket's count falls (dropped once empty, or
-- once its pages are read out while it still counts jobs, which no transition
-- leaves). Returns the elements read ('' ones included).
local function far_take(start, budget, each)
  local in_index, taken, read = {}, 0, 0
  for page = 0, FAR_PAGES - 1 do
    if read >= budget then break end
    local key = far_page_key(start, page)
    local part = redis.call('LRANGE', key, 0, budget - read - 1)
    if #part > 0 then
      for _, e in ipairs(part) do
        local id, raw, indexed = far_entry_parts(e, start)
        if id then
          each(id, raw)
          if indexed then in_index[#in_index + 1] = id end
          taken = taken + 1
        end
      end
      redis.call('LTRIM', key, #part, -1)
      redis.call('HINCRBY', K_FARN, trimmed_field(start, page), #part)
      read = read + #part
    end
  end
  if #in_index > 0 then call_chunked('HDEL', K_FARIDX, in_index) end
  if taken > 0 then far_count(start, -taken) end -- dropped once empty
  if read < budget and redis.call('ZSCORE', K_FAR, istr(start)) then drop_bucket(start) end
  return read
end

-- Promote up to `budget` far jobs whose bucket's promotion is due, off the head
-- of its pages: into delayed, or ready when due already. Returns how many
-- became ready.
local function far_promote(now, budget)
  local made = 0
  while budget > 0 do
    local start = promotable(now)
    if not start then break end
    local records, delayed, readies, ready_raws = {}, {}, {}, {}
    budget = budget - far_take(start, budget, function(id, raw)
      local _, due, prio, _, seq = struct.unpack(HEAD, raw)
      records[#records + 1], records[#records + 2] = id, raw
      if due > now then
        delayed[#delayed + 1], delayed[#delayed + 2] = istr(due), id
      else
        readies[#readies + 1], readies[#readies + 2] =
          ready_score(prio, due), struct.pack('>i6', seq) .. id
        ready_raws[#ready_raws + 1] = raw
      end
    end)
    if #records > 0 then
      jobs_put(records)
      if #delayed > 0 then zadd_many(K_DELAYED, delayed) end
      ready_add(readies, ready_raws)
      made = made + #readies / 2
    end
  end
  return made
end

-- When the far tier next needs a call: now while a promotion is due, else the
-- time of the next promotion, or nil when the tier is empty.
local function far_next_at(now)
  local first = redis.call('ZRANGE', K_FAR, 0, 0, 'WITHSCORES')
  if #first == 0 then return nil end
  return math.max(tonumber(first[2]) - math.max(FAR_HORIZON, 0), now)
end

-- The count strings (their group numbers) that hold the buckets starting in
-- (low, high) ms, the first and last such bucket's index: every group between
-- the first and the last when they are no more than the buckets, else only those
-- that hold one (a narrow bucket width over a long forecast spans millions of
-- groups, and one call must not walk them all).
local function far_groups(low, high)
  local lo, hi = '(' .. istr(low), '(' .. istr(high)
  local n = redis.call('ZCOUNT', K_FAR, lo, hi)
  if n == 0 then return {}, 0, -1 end
  local first = tonumber(redis.call('ZRANGEBYSCORE', K_FAR, lo, hi, 'LIMIT', 0, 1)[1]) / FAR_WIDTH
  local last = tonumber(redis.call('ZREVRANGEBYSCORE', K_FAR, hi, lo, 'LIMIT', 0, 1)[1]) / FAR_WIDTH
  local groups = {}
  if math.floor(last / GROUP) - math.floor(first / GROUP) < n then
    for g = math.floor(first / GROUP), math.floor(last / GROUP) do groups[#groups + 1] = g end
    return groups, first, last
  end
  repeat -- page through the buckets, each page from the last start seen
    local part = redis.call('ZRANGEBYSCORE', K_FAR, lo, hi, 'LIMIT', 0, READ_CHUNK)
    for _, bucket in ipairs(part) do
      local g = math.floor(tonumber(bucket) / FAR_WIDTH / GROUP)
      if groups[#groups] ~= g then groups[#groups + 1] = g end
    end
    if #part > 0 then lo = '(' .. part[#part] end
  until #part < READ_CHUNK
  return groups, first, last
end

-- Call fn(index, count) for each bucket starting in (low, high) ms that counts
-- jobs (index: start / FAR_WIDTH), read from the count strings.
local function far_counts(low, high, fn)
  far_check()
  local groups, first, last = far_groups(low, high)
  local keys = {}
  for i, g in ipairs(groups) do keys[i] = count_key(g) end
  local format, zeros = '>' .. string.rep('i4', GROUP), string.rep('\0', 4 * GROUP)
  for from = 1, #keys, CHUNK do
    local part = redis.call('MGET', unpack(keys, from, math.min(from + CHUNK - 1, #keys)))
    for n, data in ipairs(part) do
      if data then
        local counts = {struct.unpack(format, data .. string.sub(zeros, #data + 1))}
        local base = groups[from + n - 1] * GROUP
        for o = 1, GROUP do
          local c, index = counts[o], base + o - 1
          if c ~= 0 and index >= first and index <= last then fn(index, c) end
        end
      end
    end
  end
end

-- How many far jobs there are, and how many of them are in buckets wholly due
-- by `now` (not promoted yet: no consumer has called since; a weekend without
-- consumers leaves thousands of such buckets).
local function far_due_count(now)
  far_check() -- the bound below is in the store's width
  local all = tonumber(redis.call('HGET', K_FARN, 'all') or '0')
  if all == 0 then return 0, 0 end
  local due = 0
  far_counts(-1, now - FAR_WIDTH + 1, function(_, c) due = due + c end)
  return all, due
end
