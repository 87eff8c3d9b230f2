-- lib/3_events.lua: the event log. Events are packed while a function runs and
-- appended to the shard's stream (KEYS[7]) at its end.
-- Defines: ENTRY_BYTES, EVENT_KIND, EVENT_HAS_ERROR, EV_ATT, EV_DUE, EV_PRIO,
--   EV_ULID, I4_ESCAPE, GROUP_TAG, PUT_ULID, pack_event, group_tag, emit_event, emit,
--   flush_events.
-- Uses: K_EVENTS, K_EVSEQ, EVENT_CAP, NOW, EVENTS (emptied by begin_call) (1_keys);
--   group_of (2_record).
-- Python twin (codec.py): decode_entry, entry_last_seq, EVENT_KINDS (EVENT_KIND by
--   number), _HAS_ERROR (EVENT_HAS_ERROR), EV_ATT..EV_ULID, _I4_ESCAPE, _GROUP_TAG;
--   id_key/key_id (the 17-byte form of a ULID id); logs.py reads the stream.
--
-- Up to ENTRY_BYTES of events go to one stream entry {t = time, b = packed events}
-- whose id is "<seq of its last event>-0", so that ids count events: MINID
-- trims the log to about EVENT_CAP events, and a reader resumes after a seq.
-- One event: a byte of kind (bits 0-3) and flags, the id (a generated one as
-- its 16 bytes, flag EV_ULID; else length - 1 as a byte, then the id), then
-- by the flags: attempt (B; 255 then >I4), due_at - t (>i4; -2^31 then >i8),
-- priority (>h); nack, bury, dead and delete events end with their error
-- (>I2 length, bytes). A reserve event's lag is -(due_at - t): not stored.
-- The event of a job with a group is led by the group: GROUP_TAG (a byte no event
-- starts with: its kind would be 0), the name's length (B), the name; a job
-- without one costs no byte more (its record neither).

-- Bytes of events per stream entry: an entry then fills one 4 KiB listpack node
-- (stream-node-max-bytes, 4096 by default, is also what Redis preallocates for
-- a node) with room for the entry's own fields; a bigger entry spills into the
-- next allocator size class (5 KiB): 28 instead of 22 bytes per put event.
local ENTRY_BYTES = 3968
local EVENT_KIND = {put = 1, reserve = 2, ack = 3, nack = 4, expire = 5, dead = 6, bury = 7,
                    delete = 8, reschedule = 9, requeue = 10, touch = 11}
local EVENT_HAS_ERROR = {nack = true, dead = true, bury = true, delete = true}
local EV_ATT, EV_DUE, EV_PRIO, EV_ULID = 16, 32, 64, 128
local I4_ESCAPE = -2147483648
local GROUP_TAG = 0
local PUT_ULID = EVENT_KIND.put + EV_ULID -- put.lua packs a generated id's event itself

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

local function group_tag(g) return struct.pack('>BBc0', GROUP_TAG, #g, g) end

-- g: the job's group ('' or nil: none).
local function emit_event(kind, id, att, due, prio, err, g)
  local flags, d = EVENT_KIND[kind], due - NOW
  if #id == 17 and string.byte(id, 1) == 0 then
    flags, id = flags + EV_ULID, string.sub(id, 2)
  else
    id = struct.pack('>Bc0', #id - 1, id)
  end
  if att < 255 and d > I4_ESCAPE and d <= 2147483647 and not EVENT_HAS_ERROR[kind] then
    local packed = pack_event(flags, id, att, d, prio)
    if g and g ~= '' then packed = group_tag(g) .. packed end
    EVENTS[#EVENTS + 1] = packed
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
  local packed = struct.pack(format, flags, unpack(values))
  if g and g ~= '' then packed = group_tag(g) .. packed end
  EVENTS[#EVENTS + 1] = packed
end

-- The event of a job as unpack_job (2_record) returns it.
local function emit(kind, id, j, err)
  emit_event(kind, id, j.att, j.due, j.prio, err, group_of(j.payload))
end

local function flush_events()
  local n = #EVENTS
  if n == 0 then return end
  local last = redis.call('INCRBY', K_EVSEQ, istr(n))
  local seq = last - n
  local keep_from = istr(math.max(last - EVENT_CAP, 0))
  local now = istr(NOW)
  -- events[first..upto] as one entry
  local function append(first, upto)
    seq = seq + upto - first + 1
    local blob = table.concat(EVENTS, '', first, upto)
    local ok = redis.pcall('XADD', K_EVENTS, 'MINID', '~', keep_from, string.format('%d-0', seq),
                           't', now, 'b', blob)
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
