-- lib/1_keys.lua: the call. The shared part of the `chronoq_<hash>` function
-- library is lib/*.lua, joined in the order of scripts.LIB_FILES (1_keys,
-- 2_record, 3_events, 4_batched, 5_jobs, 6_flow, 7_far, 8_transitions, 9_timer): Lua locals
-- are lexically scoped, so each file uses only what the files before it define.
-- scripts.py then makes each transition's file (lua/<name>.lua) the body of one
-- function (FCALL chronoq_<hash>_<name>); the library is loaded once (FUNCTION
-- LOAD), so these definitions are not re-run per call.
--
-- This file: the keys, arguments, clock and event buffer of the current call.
-- Defines: K_JOBS .. K_FARIDX, ARGV, EVENT_CAP, FAR_HORIZON, FAR_WIDTH, FAR_CHECKED, CALL_NO, NOW,
--   NOW_US, EVENTS (declared here so that begin_call can empty it; filled by 3_events),
--   now_ms, begin_call.
-- Uses: nothing earlier.
-- Python twin: keys.PARTS (keys.py) is the KEYS order below.
--
-- Every function receives the same KEYS, all under one {topic:shard} hash tag:
--   1 jobs     HASH    id -> packed job record
--   2 delayed  ZSET    id, scored by due_at (ms)
--   3 ready    ZSET    seq(6) id, scored by (1000 - priority) * 2^41 + (due_at - EPOCH)
--   4 leased   ZSET    id, scored by lease deadline (ms)
--   5 dead     ZSET    id, scored by time of death (ms)
--   6 forget   ZSET    id, scored by the end of its unique_for (remembered ids)
--   7 events   STREAM  the event log of the shard (docs/contract.md §7)
--   8 wake     LIST    tokens for consumers blocked in BLPOP
--   9 paused   STRING  exists while the topic is paused
--  10 seq      STRING  put-order counter
--  11 evseq    STRING  how many events the shard has appended: the last event's seq
--  12 timer    STRING  "<due ms>:<waiter>:<backup>": the one waiting consumer that times the
--                      shard's next change (reserve.lua); lapses TIMER_LEASE ms after it
--  13 guard    STRING  never written: declared so that a call in a slot that is being
--                      migrated (Redis Cluster) is refused before it runs (keys.py)
--  14 far      ZSET    the far tier's buckets (7_far): their start (ms), scored by it;
--                      bucket <start> keeps its jobs in the LISTs <far>:<start>:<page>,
--                      its count in a field of the STRING <far>c:<start / width / 64>
--  15 farn     HASH    the tier's counts: 'all' (its jobs), '<start>:<page>' (elements
--                      promotion took off a page's head), 'width' (its bucket width)
--  16 faridx   HASH    id -> '<bucket start * 16 + page>:<place in the page>', for a far
--                      job its id does not locate
-- ARGV[1] of every function is the approximate cap of the event log (in events),
-- then, when the far tier is on, ':<horizon ms>:<bucket width ms>' (7_far); its
-- own arguments start at ARGV[2].
-- Times come from the server's clock (TIME), never from the client.
-- Each function starts with begin_call and, however its body returns, appends
-- the events the body emitted to the stream (flush_events, 3_events).

-- set for each call by begin_call (the library is loaded once, called many times)
local K_JOBS, K_DELAYED, K_READY, K_LEASED, K_DEAD
local K_FORGET, K_EVENTS, K_WAKE, K_PAUSED, K_SEQ
local K_EVSEQ, K_TIMER, K_GUARD
local K_FAR, K_FARN, K_FARIDX
local ARGV, EVENT_CAP
local FAR_HORIZON, FAR_WIDTH -- ms; FAR_HORIZON < 0: no new far jobs (7_far)
-- the caller's bucket width (FAR_WIDTH until the store's own is read: 7_far's
-- far_check), and whether this call has read it
local URL_WIDTH, FAR_CHECKED
local CALL_NO = 0 -- counts this library's calls: state a call gathers is tagged with it
local CALL_HEAD = nil -- ARGV[1] as last parsed: the same string for every call of a store
local EVENTS -- the packed events of this call (3_events: emit_event, flush_events)

local NOW -- set by now_ms(): every event of one script carries the same time
local NOW_US -- the same instant in µs, for timing a wait to less than a ms

-- A whole number as Redis reads it. Lua's own tostring (and an argument of
-- redis.call) goes through printf's %.17g: a few µs for a 13-digit time.
-- '%.0f', not '%d': Lua 5.1 casts a %d argument to a C long, 32 bits on a
-- 32-bit build, which a time in ms overflows.
local function istr(n) return string.format('%.0f', n) end

local function now_ms()
  local t = redis.call('TIME')
  NOW_US = tonumber(t[1]) * 1000000 + tonumber(t[2])
  NOW = math.floor(NOW_US / 1000)
  return NOW
end

-- Called first by every function: this call's keys and arguments, no events yet.
local function begin_call(keys, args)
  K_JOBS, K_DELAYED, K_READY, K_LEASED, K_DEAD = keys[1], keys[2], keys[3], keys[4], keys[5]
  K_FORGET, K_EVENTS, K_WAKE, K_PAUSED, K_SEQ = keys[6], keys[7], keys[8], keys[9], keys[10]
  K_EVSEQ, K_TIMER, K_GUARD = keys[11], keys[12], keys[13]
  K_FAR, K_FARN, K_FARIDX = keys[14], keys[15], keys[16]
  ARGV = args
  if args[1] ~= CALL_HEAD then -- Lua interns strings: one pointer compare on most calls
    local cap, horizon, width = string.match(args[1], '^(%d+):(%-?%d+):(%d+)$')
    if cap then
      EVENT_CAP, FAR_HORIZON, URL_WIDTH = tonumber(cap), tonumber(horizon), tonumber(width)
    else
      EVENT_CAP, FAR_HORIZON, URL_WIDTH = tonumber(args[1]), -1, 60000 -- a cap alone: no far tier
    end
    CALL_HEAD = args[1]
  end
  EVENTS, NOW, NOW_US, FAR_WIDTH, FAR_CHECKED = {}, nil, nil, URL_WIDTH, false
  CALL_NO = CALL_NO + 1
end
