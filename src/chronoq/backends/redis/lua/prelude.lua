-- chronoq prelude: the shared part of the `chronoq_<hash>` function library.
-- scripts.py builds the library: this prelude, then each transition's file as
-- the body of one function (FCALL chronoq_<hash>_<name>); the library is
-- loaded once (FUNCTION LOAD), so these definitions are not re-run per call.
--
-- Every function receives the same KEYS, all under one {topic:shard} hash tag:
--   1 jobs     HASH    id -> packed job record
--   2 delayed  ZSET    id, scored by due_at (ms)
--   3 ready    ZSET    seq(6) id, scored by (1000 - priority) * 2^41 + (due_at - EPOCH)
--   4 leased   ZSET    id, scored by lease deadline (ms)
--   5 dead     ZSET    id, scored by time of death (ms)
--   6 forget   ZSET    id, scored by the end of its unique_for (remembered ids)
--   7 events   STREAM  the event log of the shard (DESIGN §7)
--   8 wake     LIST    tokens for consumers blocked in BLPOP
--   9 paused   STRING  exists while the topic is paused
--  10 seq      STRING  put-order counter
--  11 evseq    STRING  how many events the shard has appended: the last event's seq
--  12 timer    STRING  "<due ms>:<waiter>": the one waiting consumer that times the
--                      shard's next change (reserve.lua); lapses TIMER_LEASE ms after it
-- ARGV[1] of every function is the approximate cap of the event log (in events);
-- its own arguments start at ARGV[2].
-- Times come from the server's clock (TIME), never from the client.
-- Each function starts with begin_call and, however its body returns, appends
-- the events the body emitted to the stream (flush_events).

-- set for each call by begin_call (the library is loaded once, called many times)
local K_JOBS, K_DELAYED, K_READY, K_LEASED, K_DEAD
local K_FORGET, K_EVENTS, K_WAKE, K_PAUSED, K_SEQ
local K_EVSEQ, K_TIMER
local ARGV, EVENT_CAP
local PENDING, RESERVED, DEAD, REMEMBERED = 0, 2, 3, 4
local EPOCH = 1704067200000 -- 2024-01-01: keeps ready scores below 2^53
local PRIO_SPAN = 2199023255552 -- 2^41 ms, about 70 years
-- state * 32 + flags, due_at (unsigned: up to the year 10889), priority, created_at, seq
local HEAD = '>BI6hi6i6'
local F_TTR, F_MAX, F_ATT, F_UF, F_ERR = 1, 2, 4, 8, 16
local DEFAULT_TTR, DEFAULT_MAX = 30000, 5
local MAX_WAKE_TOKENS = 64
local TIMER_LEASE = 2000 -- ms: how late due jobs can be when the timing waiter died
-- upkeep per call: small enough that a reserve stays well under 1 ms of server time
local EXPIRE_BATCH = 25
local PROMOTE_BATCH = 50 -- reserve(count) promotes up to count, at most PROMOTE_MAX
local PROMOTE_MAX = 1000
local STALE_ROUNDS = 4 -- reserve reads past stale ready members this many times at most
local CHUNK = 500 -- elements per unpack(): Lua's C stack is limited
-- Bytes of events per stream entry: an entry then fills one 4 KiB listpack node
-- (stream-node-max-bytes, 4096 by default, is also what Redis preallocates for
-- a node) with room for the entry's own fields; a bigger entry spills into the
-- next allocator size class (5 KiB): 28 instead of 22 bytes per put event.
local ENTRY_BYTES = 3968

local NOW -- set by now_ms(): every event of one script carries the same time
local NOW_US -- the same instant in µs, for timing a wait to less than a ms

local function now_ms()
  local t = redis.call('TIME')
  NOW_US = tonumber(t[1]) * 1000000 + tonumber(t[2])
  NOW = math.floor(NOW_US / 1000)
  return NOW
end

-- A record is a fixed head, then only the fields that differ from their
-- defaults (ttr_ms in 6 bytes: validation allows ten years; max_attempts and
-- attempts in 4; unique_for_ms in 6), then the payload: a plain delayed job
-- costs 21 bytes besides its payload. The first byte is state * 32 + flags.
-- A pending job's `at` is its due time; other states store it; only a
-- reserved job has a lease.
local function state_of(raw) return math.floor(string.byte(raw, 1) / 32) end

local function unpack_job(raw)
  local sf, due, prio, created, seq, pos = struct.unpack(HEAD, raw)
  local state, flags = math.floor(sf / 32), sf % 32
  local j = {state = state, due = due, prio = prio, created = created, seq = seq,
             ttr = DEFAULT_TTR, max = DEFAULT_MAX, att = 0, uf = 0, at = due, lease = '',
             err = ''}
  if bit.band(flags, F_TTR) ~= 0 then j.ttr, pos = struct.unpack('>I6', raw, pos) end
  if bit.band(flags, F_MAX) ~= 0 then j.max, pos = struct.unpack('>I4', raw, pos) end
  if bit.band(flags, F_ATT) ~= 0 then j.att, pos = struct.unpack('>I4', raw, pos) end
  if bit.band(flags, F_UF) ~= 0 then j.uf, pos = struct.unpack('>i6', raw, pos) end
  if state ~= PENDING then j.at, pos = struct.unpack('>i6', raw, pos) end
  local n
  if state == RESERVED then
    n, pos = struct.unpack('>B', raw, pos)
    j.lease, pos = string.sub(raw, pos, pos + n - 1), pos + n
  end
  if bit.band(flags, F_ERR) ~= 0 then
    n, pos = struct.unpack('>I2', raw, pos)
    j.err, pos = string.sub(raw, pos, pos + n - 1), pos + n
  end
  j.payload = string.sub(raw, pos)
  return j
end

-- A ready (pending) record leased: state RESERVED, attempts + 1, then its lease
-- deadline and token, spliced in without unpacking the rest (reserve's hot path).
-- Returns the new record and its attempt.
local function lease_record(raw, at, lease)
  local flags = string.byte(raw, 1) % 32
  local pos = 22 -- after the head
  if bit.band(flags, F_TTR) ~= 0 then pos = pos + 6 end
  if bit.band(flags, F_MAX) ~= 0 then pos = pos + 4 end
  local att, rest = 1, pos
  if bit.band(flags, F_ATT) ~= 0 then att, rest = struct.unpack('>I4', raw, pos) + 1, pos + 4 end
  local tail = rest -- after unique_for: where a pending record's error and payload are
  if bit.band(flags, F_UF) ~= 0 then tail = rest + 6 end
  return struct.pack('>Bc0I4c0i6Bc0c0', RESERVED * 32 + bit.bor(flags, F_ATT),
                     string.sub(raw, 2, pos - 1), att, string.sub(raw, rest, tail - 1), at,
                     #lease, lease, string.sub(raw, tail)), att
end

-- What ack needs of a record, without a table: nil unless it is reserved;
-- else its lease deadline, lease token, attempts, due_at, priority, unique_for.
local function lease_view(raw)
  local sf, due, prio, _, _, pos = struct.unpack(HEAD, raw)
  if math.floor(sf / 32) ~= RESERVED then return nil end
  local flags, att, uf = sf % 32, 0, 0
  if bit.band(flags, F_TTR) ~= 0 then pos = pos + 6 end
  if bit.band(flags, F_MAX) ~= 0 then pos = pos + 4 end
  if bit.band(flags, F_ATT) ~= 0 then att, pos = struct.unpack('>I4', raw, pos) end
  if bit.band(flags, F_UF) ~= 0 then uf, pos = struct.unpack('>i6', raw, pos) end
  local at, n, start = struct.unpack('>i6B', raw, pos)
  return at, string.sub(raw, start, start + n - 1), att, due, prio, uf
end

local function pack_job(j)
  local flags, format, values = 0, HEAD, {0, j.due, j.prio, j.created, j.seq}
  local n = 5
  if j.ttr ~= DEFAULT_TTR then flags, format, n = flags + F_TTR, format .. 'I6', n + 1; values[n] = j.ttr end
  if j.max ~= DEFAULT_MAX then flags, format, n = flags + F_MAX, format .. 'I4', n + 1; values[n] = j.max end
  if j.att ~= 0 then flags, format, n = flags + F_ATT, format .. 'I4', n + 1; values[n] = j.att end
  if j.uf ~= 0 then flags, format, n = flags + F_UF, format .. 'i6', n + 1; values[n] = j.uf end
  if j.state ~= PENDING then format, n = format .. 'i6', n + 1; values[n] = j.at end
  if j.state == RESERVED then
    format, values[n + 1], values[n + 2], n = format .. 'Bc0', #j.lease, j.lease, n + 2
  end
  local err = string.sub(j.err, 1, 65535)
  if err ~= '' then
    flags, format, values[n + 1], values[n + 2], n = flags + F_ERR, format .. 'I2c0', #err, err, n + 2
  end
  values[1], values[n + 1] = j.state * 32 + flags, j.payload
  return struct.pack(format .. 'c0', unpack(values, 1, n + 1))
end

-- Every access to the jobs hash goes through these.
local function job_raw(id) return redis.call('HGET', K_JOBS, id) end

-- The records of `ids`, in order (false where there is none).
local function jobs_raw(ids)
  if #ids <= CHUNK then
    if #ids == 0 then return {} end
    return redis.call('HMGET', K_JOBS, unpack(ids))
  end
  local out = {}
  for first = 1, #ids, CHUNK do
    local part = redis.call('HMGET', K_JOBS, unpack(ids, first, math.min(first + CHUNK - 1, #ids)))
    for i = 1, #part do out[#out + 1] = part[i] end
  end
  return out
end

local function load_job(id)
  local raw = job_raw(id)
  if not raw then return nil end
  return unpack_job(raw)
end

local function seq_bytes(j) return struct.pack('>i6', j.seq) end
local function ready_member(j, id) return seq_bytes(j) .. id end
-- Priority first: a due time past EPOCH + PRIO_SPAN (2094) counts as that time,
-- so that it cannot reach the next priority's scores (put order breaks the tie).
local function ready_score(prio, due)
  return (1000 - prio) * PRIO_SPAN + math.min(due - EPOCH, PRIO_SPAN - 1)
end

-- Events are packed, collected while the script runs, and appended at its end:
-- up to ENTRY_BYTES of them to one stream entry {t = time, b = packed events}
-- whose id is "<seq of its last event>-0", so that ids count events: MINID
-- trims the log to about EVENT_CAP events, and a reader resumes after a seq.
-- One event: a byte of kind (bits 0-3) and flags, the id (a generated one as
-- its 16 bytes, flag EV_ULID; else length - 1 as a byte, then the id), then
-- by the flags: attempt (B; 255 then >I4), due_at - t (>i4; -2^31 then >i8),
-- priority (>h); nack, bury, dead and delete events end with their error
-- (>I2 length, bytes). A reserve event's lag is -(due_at - t): not stored.
local EVENT_KIND = {put = 1, reserve = 2, ack = 3, nack = 4, expire = 5, dead = 6, bury = 7,
                    delete = 8, reschedule = 9, requeue = 10, touch = 11}
local EVENT_HAS_ERROR = {nack = true, dead = true, bury = true, delete = true}
local EV_ATT, EV_DUE, EV_PRIO, EV_ULID = 16, 32, 64, 128
local I4_ESCAPE = -2147483648
local PUT_ULID = EVENT_KIND.put + EV_ULID -- put.lua packs a generated id's event itself
local EVENTS = {}

-- One event without an error whose attempt is under 255 and whose due_at - t
-- fits 4 bytes (nearly all): one struct.pack with the fields present.
local function pack_event(flags, id, att, d, prio)
  if att == 0 then
    if d == 0 then
      if prio == 0 then return struct.pack('>Bc0', flags, id) end
      return struct.pack('>Bc0h', flags + EV_PRIO, id, prio)
    end
    if prio == 0 then return struct.pack('>Bc0i4', flags + EV_DUE, id, d) end
    return struct.pack('>Bc0i4h', flags + EV_DUE + EV_PRIO, id, d, prio)
  end
  if d == 0 then
    if prio == 0 then return struct.pack('>Bc0B', flags + EV_ATT, id, att) end
    return struct.pack('>Bc0Bh', flags + EV_ATT + EV_PRIO, id, att, prio)
  end
  if prio == 0 then return struct.pack('>Bc0Bi4', flags + EV_ATT + EV_DUE, id, att, d) end
  return struct.pack('>Bc0Bi4h', flags + EV_ATT + EV_DUE + EV_PRIO, id, att, d, prio)
end

local function emit_event(kind, id, att, due, prio, err)
  local flags, d = EVENT_KIND[kind], due - NOW
  if #id == 17 and string.byte(id, 1) == 0 then
    flags, id = flags + EV_ULID, string.sub(id, 2)
  else
    id = struct.pack('>Bc0', #id - 1, id)
  end
  if att < 255 and d > I4_ESCAPE and d <= 2147483647 and not EVENT_HAS_ERROR[kind] then
    EVENTS[#EVENTS + 1] = pack_event(flags, id, att, d, prio)
    return
  end
  -- the rest: a long attempt count or due offset, an error
  local format, values = '>Bc0', {id}
  if att ~= 0 then
    flags = flags + EV_ATT
    if att < 255 then
      format, values[#values + 1] = format .. 'B', att
    else
      format, values[#values + 1], values[#values + 2] = format .. 'BI4', 255, att
    end
  end
  if d ~= 0 then
    flags = flags + EV_DUE
    if d > I4_ESCAPE and d <= 2147483647 then
      format, values[#values + 1] = format .. 'i4', d
    else
      format, values[#values + 1], values[#values + 2] = format .. 'i4i8', I4_ESCAPE, d
    end
  end
  if prio ~= 0 then flags, format, values[#values + 1] = flags + EV_PRIO, format .. 'h', prio end
  if EVENT_HAS_ERROR[kind] then
    err = string.sub(err or '', 1, 65535)
    format, values[#values + 1], values[#values + 2] = format .. 'I2c0', #err, err
  end
  EVENTS[#EVENTS + 1] = struct.pack(format, flags, unpack(values))
end

local function emit(kind, id, j, err) emit_event(kind, id, j.att, j.due, j.prio, err) end

local function flush_events()
  local n = #EVENTS
  if n == 0 then return end
  local last = redis.call('INCRBY', K_EVSEQ, n)
  local seq = last - n
  local keep_from = math.max(last - EVENT_CAP, 0)
  -- events[first..upto] as one entry
  local function append(first, upto)
    seq = seq + upto - first + 1
    local blob = table.concat(EVENTS, '', first, upto)
    local ok = redis.pcall('XADD', K_EVENTS, 'MINID', '~', keep_from, seq .. '-0',
                           't', NOW, 'b', blob)
    if type(ok) == 'table' and ok.err then
      -- the counter is behind the stream (deleted or restored on its own):
      -- number the events still to append after the stream's last entry
      local top = redis.call('XREVRANGE', K_EVENTS, '+', '-', 'COUNT', 1)[1]
      if not top then error(ok.err) end
      local top_seq = tonumber(string.match(top[1], '^(%d+)'))
      redis.call('SET', K_EVSEQ, top_seq + n - first + 1)
      seq = top_seq + upto - first + 1
      redis.call('XADD', K_EVENTS, 'MINID', '~', keep_from, seq .. '-0', 't', NOW, 'b', blob)
    end
  end
  local first, size = 1, 0
  for i = 1, n do
    local len = #EVENTS[i]
    if i > first and size + len > ENTRY_BYTES then
      append(first, i - 1)
      first, size = i, 0
    end
    size = size + len
  end
  append(first, n)
  EVENTS = {}
end

-- A variadic command over a long list, CHUNK arguments at a time (CHUNK is
-- even, so score/member and field/value pairs stay together).
local function call_chunked(command, key, list)
  for first = 1, #list, CHUNK do
    redis.call(command, key, unpack(list, first, math.min(first + CHUNK - 1, #list)))
  end
end

-- The other writes of the jobs hash (reads: job_raw, jobs_raw).
local function job_put(id, raw) redis.call('HSET', K_JOBS, id, raw) end
local function jobs_put(list) call_chunked('HSET', K_JOBS, list) end -- id/record pairs
local function jobs_del(ids) call_chunked('HDEL', K_JOBS, ids) end

-- ZADD of score/member pairs. A small sorted set is a listpack, whose inserts
-- scan it from the start: a batch of n pairs costs O(n^2) there (a ZADD of 100
-- leases took 260 µs, 46 µs in a skiplist). A member longer than
-- zset-max-listpack-value (64) turns the set into a skiplist for good (Redis
-- does not convert back while it has members), so a batch adds one first.
-- 65 bytes; no job id or ready member starts with \1 (the library's load step
-- has no string library: a literal)
local SKIPLIST_MEMBER = '\1~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~'
local SKIPLIST_BATCH = 32 -- pairs: smaller batches cost little in a listpack
local function zadd_many(key, list)
  if #list < 2 * SKIPLIST_BATCH then
    call_chunked('ZADD', key, list)
    return
  end
  if redis.call('OBJECT', 'ENCODING', key) == 'skiplist' then -- the common case: one read
    call_chunked('ZADD', key, list)
    return
  end
  redis.call('ZADD', key, 0, SKIPLIST_MEMBER)
  call_chunked('ZADD', key, list)
  redis.call('ZREM', key, SKIPLIST_MEMBER)
end

-- Up to n more tokens on the wake list, which holds at most MAX_WAKE_TOKENS
-- (a read first: a write command costs a script ~2 µs more than a read).
local function wake(n)
  if n <= 0 then return end
  n = math.min(n, MAX_WAKE_TOKENS - redis.call('LLEN', K_WAKE))
  if n <= 0 then return end
  local tokens = {}
  for i = 1, n do tokens[i] = '1' end
  redis.call('RPUSH', K_WAKE, unpack(tokens))
end

-- A pending job goes in delayed or ready by its due time.
local function index_pending(id, j, now)
  if j.due > now then
    redis.call('ZADD', K_DELAYED, j.due, id)
  else
    redis.call('ZADD', K_READY, ready_score(j.prio, j.due), ready_member(j, id))
  end
end

-- Take a job out of whatever index holds it (the record stays).
local function unindex(id, j)
  if j.state == PENDING then
    redis.call('ZREM', K_DELAYED, id)
    redis.call('ZREM', K_READY, ready_member(j, id))
  elseif j.state == RESERVED then
    redis.call('ZREM', K_LEASED, id)
  elseif j.state == DEAD then
    redis.call('ZREM', K_DEAD, id)
  elseif j.state == REMEMBERED then
    redis.call('ZREM', K_FORGET, id)
  end
end

local function kill(id, j, now, kind, err)
  if err and err ~= '' then j.err = err end
  j.state, j.at, j.lease = DEAD, now, ''
  job_put(id, pack_job(j))
  redis.call('ZADD', K_DEAD, now, id)
  emit(kind, id, j, err)
end

-- A lease that ran out: back to ready, or dead when attempts are used up.
-- Returns 1 when the job became ready.
local function expire(id, j, now)
  redis.call('ZREM', K_LEASED, id)
  if j.att >= j.max then
    kill(id, j, now, 'dead', 'lease expired on attempt ' .. j.att .. ' of ' .. j.max)
    return 0
  end
  j.state, j.at, j.lease = PENDING, j.due, ''
  job_put(id, pack_job(j))
  redis.call('ZADD', K_READY, ready_score(j.prio, j.due), ready_member(j, id))
  emit('expire', id, j)
  return 1
end

-- The job as a by-id operation must see it: an expired lease is applied now,
-- and a remembered id whose time is over is forgotten.
local function current(id, now)
  local j = load_job(id)
  if not j then return nil end
  if j.state == RESERVED and j.at <= now then
    if expire(id, j, now) == 1 then wake(1) end
  elseif j.state == REMEMBERED and j.at <= now then
    jobs_del({id})
    redis.call('ZREM', K_FORGET, id)
    return nil
  end
  return j
end

-- Gone: acked or deleted. Keeps the id for unique_for, else removes the record.
local function remove(id, j, now)
  unindex(id, j)
  if j.uf > 0 then
    j.state, j.at, j.lease, j.err, j.payload = REMEMBERED, now + j.uf, '', '', ''
    job_put(id, pack_job(j))
    redis.call('ZADD', K_FORGET, j.at, id)
  else
    jobs_del({id})
  end
end

local function lease_of(id, lease, now)
  local j = load_job(id)
  if not j or j.state ~= RESERVED or j.lease ~= lease or j.at <= now then return nil end
  return j
end

-- The shard's timer: which waiter times its next change, and for which due time.
local function timer_holder()
  local held = redis.call('GET', K_TIMER)
  if not held then return nil, nil end
  local at, who = string.match(held, '^(%d+):(.*)$')
  return tonumber(at), who
end

-- `waiter` stops timing the shard (if it did): another waiter is woken to take over.
-- Returns true when it held the timer.
local function give_up_timer(waiter)
  local _, who = timer_holder()
  if who ~= waiter then return false end
  redis.call('DEL', K_TIMER)
  wake(1)
  return true
end

-- Bounded upkeep on the reserve path: reclaim expired leases, promote due jobs,
-- forget remembered ids whose time is over. Returns how many became ready.
local function upkeep(now, promote)
  local made = 0
  -- an index entry whose record is gone or in another state is stale (a call
  -- that failed half-way, a put run twice): it is dropped, never acted on
  local expired = redis.call('ZRANGEBYSCORE', K_LEASED, '-inf', now, 'LIMIT', 0, EXPIRE_BATCH)
  local raws = jobs_raw(expired)
  for i, id in ipairs(expired) do
    if raws[i] and state_of(raws[i]) == RESERVED then
      made = made + expire(id, unpack_job(raws[i]), now)
    else
      redis.call('ZREM', K_LEASED, id)
    end
  end
  local due = redis.call('ZRANGEBYSCORE', K_DELAYED, '-inf', now, 'LIMIT', 0,
                        promote or PROMOTE_BATCH)
  local adds = {}
  raws = jobs_raw(due)
  for i, id in ipairs(due) do
    if raws[i] and state_of(raws[i]) == PENDING then
      local _, at, prio, _, seq = struct.unpack(HEAD, raws[i])
      adds[#adds + 1], adds[#adds + 2] = ready_score(prio, at), struct.pack('>i6', seq) .. id
    end
  end
  zadd_many(K_READY, adds)
  call_chunked('ZREM', K_DELAYED, due)
  made = made + #adds / 2
  local forgotten = redis.call('ZRANGEBYSCORE', K_FORGET, '-inf', now, 'LIMIT', 0, PROMOTE_BATCH)
  local gone = {}
  raws = jobs_raw(forgotten)
  for i, id in ipairs(forgotten) do
    if raws[i] and state_of(raws[i]) == REMEMBERED then gone[#gone + 1] = id end
  end
  jobs_del(gone)
  call_chunked('ZREM', K_FORGET, forgotten)
  return made
end

-- Called first by every function: this call's keys and arguments, no events yet.
local function begin_call(keys, args)
  K_JOBS, K_DELAYED, K_READY, K_LEASED, K_DEAD = keys[1], keys[2], keys[3], keys[4], keys[5]
  K_FORGET, K_EVENTS, K_WAKE, K_PAUSED, K_SEQ = keys[6], keys[7], keys[8], keys[9], keys[10]
  K_EVSEQ, K_TIMER = keys[11], keys[12]
  ARGV, EVENT_CAP = args, args[1]
  EVENTS, NOW, NOW_US = {}, nil, nil
end
