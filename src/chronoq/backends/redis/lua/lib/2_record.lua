-- lib/2_record.lua: the record codec, the packed value of a job in the jobs hash.
-- Defines: PENDING, RESERVED, DEAD, REMEMBERED (states), EPOCH, PRIO_SPAN, HEAD,
--   F_TTR .. F_ERR (flags), DEFAULT_TTR, DEFAULT_MAX, state_of, unpack_job,
--   lease_record, lease_view, pack_job, seq_bytes, ready_member, ready_score, group_of,
--   group_of_raw.
-- Uses: nothing earlier (pure functions of their arguments).
-- Python twin (codec.py): _record (unpack_job), leased_fields (reads what
--   lease_record and pack_job write for a reserved job), info_from_record,
--   pack_new_job (the client packs a new job's optional fields and payload; put.lua
--   adds the head), split_payload (group_of), _HEAD, PENDING/RESERVED/DEAD/REMEMBERED,
--   F_TTR..F_ERR, DEFAULT_TTR_MS/DEFAULT_MAX_ATTEMPTS. tests/redis/test_lua_codec.py holds them in step.
--
-- A record is a fixed head, then only the fields that differ from their
-- defaults (ttr_ms in 6 bytes: validation allows ten years; max_attempts and
-- attempts in 4; unique_for_ms in 6), then the payload: a plain delayed job
-- costs 21 bytes besides its payload. The first byte is state * 32 + flags.
-- A pending job's `at` is its due time; other states store it; only a
-- reserved job has a lease. The payload part is opaque here: the client may
-- lead it with a trace context (codec.py, split_payload: byte 1, then 25
-- bytes), then a group (byte 2, its length in a byte, its name), which every
-- transition keeps as it keeps the payload.
local PENDING, RESERVED, DEAD, REMEMBERED = 0, 2, 3, 4
local EPOCH = 1704067200000 -- 2024-01-01: keeps ready scores below 2^53
local PRIO_SPAN = 2199023255552 -- 2^41 ms, about 70 years
-- state * 32 + flags, due_at (unsigned: up to the year 10889), priority, created_at, seq
local HEAD = '>BI6hi6i6'
local F_TTR, F_MAX, F_ATT, F_UF, F_ERR = 1, 2, 4, 8, 16
local DEFAULT_TTR, DEFAULT_MAX = 30000, 5

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

-- A ready job's member and score in the ready set (KEYS[3], 1_keys).
local function seq_bytes(j) return struct.pack('>i6', j.seq) end
local function ready_member(j, id) return seq_bytes(j) .. id end
-- Priority first: a due time past EPOCH + PRIO_SPAN (2094) counts as that time,
-- so that it cannot reach the next priority's scores (put order breaks the tie).
local function ready_score(prio, due)
  return (1000 - prio) * PRIO_SPAN + math.min(due - EPOCH, PRIO_SPAN - 1)
end

-- The group named in a record's payload part from `pos` ('' for none): a trace
-- context (byte 1, then 25 bytes) may come first (codec.py: split_payload).
local function group_of(part, pos)
  pos = pos or 1
  local lead = string.byte(part, pos)
  if lead == 1 then
    pos = pos + 26
    lead = string.byte(part, pos)
  end
  if lead ~= 2 then return '' end
  return string.sub(part, pos + 2, pos + 1 + string.byte(part, pos + 1))
end

-- The group of a whole record ('' for none), without unpacking it.
local function group_of_raw(raw)
  local sf = string.byte(raw, 1)
  local state, flags, pos = math.floor(sf / 32), sf % 32, 22
  if bit.band(flags, F_TTR) ~= 0 then pos = pos + 6 end
  if bit.band(flags, F_MAX) ~= 0 then pos = pos + 4 end
  if bit.band(flags, F_ATT) ~= 0 then pos = pos + 4 end
  if bit.band(flags, F_UF) ~= 0 then pos = pos + 6 end
  if state ~= PENDING then pos = pos + 6 end
  if state == RESERVED then pos = pos + 1 + string.byte(raw, pos) end
  if bit.band(flags, F_ERR) ~= 0 then pos = pos + 2 + struct.unpack('>I2', raw, pos) end
  return group_of(raw, pos)
end
