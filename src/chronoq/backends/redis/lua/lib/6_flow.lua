-- lib/6_flow.lua: flow control (docs/contract.md §10): a shard's groups, their turns,
-- their limits and the topic's, their counts.
-- Defines: flow_on, flow_flags, flow_enable, group_wake, ready_add, ready_add_one, ready_rem, turn_leave, leases_ended, lease_ended, flow_lease,
--   flow_next_at, flow_release_all.
-- Uses: K_READY, K_LEASED, CALL_NO (1_keys); HEAD, F_TTR, DEFAULT_TTR, lease_record,
--   group_of, group_of_raw (2_record); emit_event (3_events); call_chunked, zadd_many, wake
--   (4_batched); job_raw, jobs_raw (5_jobs).
-- Python twin: chronoq.limits (Rule.pack: the rule texts; shard_share: rule_share;
--   refilled: refill), redis/flow.py.
-- A shard is under flow control from its first job with a group (put.lua is told by the
-- client), its first limit or its first paused group; before that no key below exists
-- and a path costs one EXISTS more. The default group ('': jobs without one) keeps its
-- due jobs in ready (KEYS[3]); every other key sits beside it, under its hash tag:
--   ready>f  HASH  'turns' (jobs handed out: the groups' clock), 'flags' (flow_flags),
--                  'leased' (the shard's live leases, kept with flag 't'), 'queued' (due
--                  jobs of named groups), 'tokens', 'since' (the topic's bucket),
--                  'rule', 'default' (Rule.pack texts), 'shard' ('<n>:<shards>')
--   ready>q<g> ZSET group g's due jobs, as ready holds the default group's
--   ready>t  ZSET  groups with due jobs that may be served now, by last turn served
--   ready>k  ZSET  groups with due jobs, by how many (the largest backlogs)
--   ready>n  HASH  group -> the turn it was last served at (a group keeps its place)
--   ready>w  ZSET  groups waiting for a token, by when it comes (ms)
--   ready>s  SET   groups waiting for one of their leases to end
--   ready>l  HASH  group -> its live leases (kept with flag 'g')
--   ready>b  HASH  group -> '<tokens>:<since ms>', its bucket
--   ready>p  SET   paused groups
--   ready>r  HASH  group -> its own rule

local flow_call, flow_is, flags_call, flags_are = -1, false, -1, ''
local function fk(suffix) return K_READY .. '>' .. suffix end

local function flow_on() -- read once per call
  if flow_call ~= CALL_NO then
    flow_call, flow_is = CALL_NO, redis.call('EXISTS', fk('f')) == 1
  end
  return flow_is
end

-- What the shard's limits need kept (limits.lua, from redis/flow.py): 't' the
-- topic's live leases (a topic concurrency), 'g' each group's (a group
-- concurrency), 'r' groups waiting for a token (a group rate), 'o' groups with
-- rules of their own. Without them, a lease's end costs nothing here.
local function flow_flags()
  if flags_call ~= CALL_NO then
    flags_call, flags_are = CALL_NO, redis.call('HGET', fk('f'), 'flags') or ''
  end
  return flags_are
end

local function flags_have(c) return string.find(flow_flags(), c, 1, true) ~= nil end

local function flow_enable()
  if flow_on() then return end
  redis.call('HSET', fk('f'), 'turns', 0)
  local ready = redis.call('ZCARD', K_READY)
  if ready > 0 then
    redis.call('ZADD', fk('t'), 0, '')
    redis.call('ZADD', fk('k'), ready, '')
  end
  flow_is = true
end

local function ready_key(g) return g == '' and K_READY or fk('q') .. g end

-- A group with due jobs takes its place in the turns, unless paused or waiting.
local function group_wake(g)
  if redis.call('ZSCORE', fk('k'), g) == false then return end
  if redis.call('SISMEMBER', fk('p'), g) == 1 or redis.call('SISMEMBER', fk('s'), g) == 1
    or redis.call('ZSCORE', fk('w'), g) ~= false then return end
  -- back at the turn it left at (it waited, or was paused), else at the end of the
  -- line: a group seen anew takes the clock's turn, so new groups cannot starve others
  local turn = redis.call('HGET', fk('n'), g)
  if turn then
    redis.call('HDEL', fk('n'), g)
  else
    turn = redis.call('HGET', fk('f'), 'turns') or 0
  end
  redis.call('ZADD', fk('t'), 'NX', turn, g)
end

-- Due jobs into ready: score/member pairs and, for each, its record.
local function ready_add(pairs, raws)
  if #pairs == 0 then return end
  if not flow_on() then
    zadd_many(K_READY, pairs)
    return
  end
  local by_group, order = {}, {}
  for i = 1, #raws do
    local g = group_of_raw(raws[i])
    local list = by_group[g]
    if not list then
      list = {}
      by_group[g], order[#order + 1] = list, g
    end
    list[#list + 1], list[#list + 2] = pairs[2 * i - 1], pairs[2 * i]
  end
  for _, g in ipairs(order) do
    local list = by_group[g]
    zadd_many(ready_key(g), list)
    redis.call('ZINCRBY', fk('k'), #list / 2, g)
    if g ~= '' then redis.call('HINCRBY', fk('f'), 'queued', #list / 2) end
    group_wake(g)
  end
end

-- One due job into ready, by its payload part (a record's, unpack_job's j.payload).
local function ready_add_one(score, member, part)
  if not flow_on() then
    redis.call('ZADD', K_READY, score, member)
    return
  end
  local g = group_of(part)
  redis.call('ZADD', ready_key(g), score, member)
  redis.call('ZINCRBY', fk('k'), 1, g)
  if g ~= '' then redis.call('HINCRBY', fk('f'), 'queued', 1) end
  group_wake(g)
end

-- A group out of the turns: waiting (for a token, a slot, a resume), it keeps its
-- place (`keep`); out of due jobs, it is forgotten and comes back at the end of the line.
local function turn_leave(g, keep)
  local turn = redis.call('ZSCORE', fk('t'), g)
  if turn then
    if keep then redis.call('HSET', fk('n'), g, turn) end
    redis.call('ZREM', fk('t'), g)
  end
end

-- Due jobs of group g gone (n of them): its backlog; `counted` when the caller
-- counts the named groups' due jobs ('queued') itself.
local function group_left(g, n, counted)
  if g ~= '' and not counted then redis.call('HINCRBY', fk('f'), 'queued', -n) end
  if tonumber(redis.call('ZINCRBY', fk('k'), -n, g)) <= 0 then
    redis.call('ZREM', fk('k'), g)
    turn_leave(g)
  end
end

local function ready_rem(member, part)
  if not flow_on() then
    redis.call('ZREM', K_READY, member)
    return
  end
  local g = group_of(part)
  if redis.call('ZREM', ready_key(g), member) == 1 then group_left(g, 1) end
end

-- A rule's fields from its text (chronoq.limits.Rule.pack), nil where unset.
local function rule_of(text)
  local r = {}
  if not text or text == '' then return r end -- unset
  local rate, per, burst, conc = string.match(text, '^([^:]*):([^:]*):([^:]*):([^:]*)$')
  r.rate, r.per, r.burst, r.conc = tonumber(rate), tonumber(per), tonumber(burst), tonumber(conc)
  return r
end

local function rule_over(own, base)
  local r = {}
  for _, name in ipairs({'rate', 'per', 'burst', 'conc'}) do r[name] = own[name] or base[name] end
  return r
end

-- What shard n of `shards` enforces of a rule (chronoq.limits.shard_share):
-- the rate and the bucket over the shards, the leases split so that the first
-- conc mod shards shards counted from `salt` (the group's) take one more.
local function rule_share(r, n, shards, salt)
  local s = {per = r.per or 1}
  if r.rate then
    local bucket = r.burst or math.min(math.max(1, math.floor(r.rate + 0.5)), 1000000)
    s.rate, s.bucket = r.rate / shards, math.max(1, math.floor(bucket / shards))
  end
  if r.conc then
    s.conc = math.floor(r.conc / shards)
    if (n - salt) % shards < r.conc % shards then s.conc = s.conc + 1 end
  end
  return s
end

local function salt_of(g, shards)
  local sum = 0
  for i = 1, #g do sum = sum + string.byte(g, i) end
  return sum % shards
end

local function refill(tokens, since, now, s)
  if not tokens then return s.bucket end
  return math.min(s.bucket, tokens + math.max(now - since, 0) * s.rate / (s.per * 1000))
end

local function token_wait(tokens, s) return (1 - tokens) * s.per * 1000 / s.rate end

-- Leases of groups ended (ack, nack, bury, release, expiry, delete): `ended` maps a
-- group to how many. Their slots are free in this same step, and a consumer woken
-- when a limit on leases may have held one up.
local function leases_ended(ended)
  if not flow_on() or flow_flags() == '' then return end
  local total, woke = 0, false
  for g, k in pairs(ended) do
    total = total + k
    if flags_have('g') then
      if redis.call('HINCRBY', fk('l'), g, -k) <= 0 then redis.call('HDEL', fk('l'), g) end
      if redis.call('SREM', fk('s'), g) == 1 then
        group_wake(g)
        woke = true
      end
    end
  end
  if flags_have('t') then
    redis.call('HINCRBY', fk('f'), 'leased', -total)
    woke = true
  end
  if woke then wake(1) end
end

local function lease_ended(g) leases_ended({[g] = 1}) end

-- Every waiting group looked at anew (limits changed, a group resumed).
local function flow_release_all()
  local waiting = redis.call('SMEMBERS', fk('s'))
  local tokens = redis.call('ZRANGE', fk('w'), 0, -1)
  redis.call('DEL', fk('s'), fk('w'))
  for _, g in ipairs(waiting) do group_wake(g) end
  for _, g in ipairs(tokens) do group_wake(g) end
end

-- Lease the popped due jobs `members` (of the groups `owners`) that are still pending
-- (a stale member, whose record is gone, not pending or of another put, is dropped);
-- `got` counts each group's leases.
local function take(members, owners, now, call, got)
  local ids = {}
  for i, member in ipairs(members) do ids[i] = string.sub(member, 7) end
  local raws, n = jobs_raw(ids), call.n
  for i, id in ipairs(ids) do
    local raw, sf, due, prio, _, seq = raws[i], nil, nil, nil, nil, nil
    if raw then sf, due, prio, _, seq = struct.unpack(HEAD, raw) end
    if raw and sf < 32 and seq == struct.unpack('>i6', members[i]) then
      n = n + 1
      got[owners[i]] = (got[owners[i]] or 0) + 1
      local ttr = call.ttr
      if ttr <= 0 then
        ttr = DEFAULT_TTR
        if bit.band(sf, F_TTR) ~= 0 then ttr = struct.unpack('>I6', raw, 22) end
      end
      local record, att = lease_record(raw, now + ttr, call.lease)
      call.records[2 * n - 1], call.records[2 * n] = id, record
      call.leased[2 * n - 1], call.leased[2 * n] = now + ttr, id
      emit_event('reserve', id, att, due, prio, nil, owners[i])
      call.out[2 * n + 2], call.out[2 * n + 3] = id, record
    end
  end
  call.n = n
end

-- Lease up to `count` due jobs in turns: the groups served least recently among those
-- that may be, one job each, in rounds (a group alone in the turns takes what its limits
-- allow at once), within the topic's and each group's share of their limits. Appends each
-- job to `out` (id, record) and the reserve's writes (`records`, `leased`); how many.
local function flow_lease(count, ttr_override, lease, now, out, records, leased)
  local f = fk('f')
  local st = redis.call('HMGET', f, 'turns', 'leased', 'tokens', 'since', 'rule', 'default',
                        'shard', 'flags')
  flags_call, flags_are = CALL_NO, st[8] or ''
  local turns, live = tonumber(st[1]) or 0, tonumber(st[2]) or 0
  local shard, shards = string.match(st[7] or '0:1', '^(%d+):(%d+)$')
  shard, shards = tonumber(shard), tonumber(shards)
  local topic = rule_share(rule_of(st[5]), shard, shards, 0)
  local default = rule_of(st[6])
  local owned = flags_have('o')
  local room, tokens = count, nil
  if topic.conc then room = math.min(room, topic.conc - live) end
  if topic.rate then
    tokens = refill(tonumber(st[3]), tonumber(st[4]), now, topic)
    room = math.min(room, math.floor(tokens))
  end
  if flags_have('r') then
    local due = redis.call('ZRANGEBYSCORE', fk('w'), '-inf', now)
    if #due > 0 then
      call_chunked('ZREM', fk('w'), due)
      for _, g in ipairs(due) do group_wake(g) end
    end
    -- the buckets of groups without due jobs are forgotten once full again (a few a
    -- call): a million groups that came and went leave nothing behind
    local page = redis.call('HSCAN', fk('b'), redis.call('HGET', f, 'swept') or '0', 'COUNT', 16)
    redis.call('HSET', f, 'swept', page[1])
    for i = 1, #page[2], 2 do
      local g = page[2][i]
      if redis.call('ZSCORE', fk('k'), g) == false then
        local own = owned and g ~= '' and redis.call('HGET', fk('r'), g) or nil
        local rule = rule_share(rule_over(rule_of(own), default), shard, shards, salt_of(g, shards))
        local t, since = string.match(page[2][i + 1], '^([^:]+):(%d+)$')
        if not rule.rate or refill(tonumber(t), tonumber(since), now, rule) >= rule.bucket then
          redis.call('HDEL', fk('b'), g)
        end
      end
    end
  end
  local call = {n = 0, ttr = ttr_override, lease = lease, out = out, records = records,
                leased = leased}
  local touched, order = {}, {} -- group -> {leased, popped, bucket}
  -- every group's share of the default, when no group has its own and the
  -- default's leases need no split by group
  local common = not owned and not default.conc and rule_share(default, shard, shards, 0)
  while call.n < room do
    local heads = redis.call('ZRANGE', fk('t'), 0, room - call.n - 1)
    if #heads == 0 then break end
    local members, owners, emptied, got = {}, {}, {}, {}
    for _, g in ipairs(heads) do
      local rule = common
      if not rule then
        rule = default
        if owned and g ~= '' then
          rule = rule_over(rule_of(redis.call('HGET', fk('r'), g)), default)
        end
        rule = rule_share(rule, shard, shards, salt_of(g, shards))
      end
      local mine = touched[g]
      if not mine then
        mine = {leased = 0, popped = 0}
        touched[g], order[#order + 1] = mine, g
      end
      local cap, full = #heads == 1 and room - call.n or 1, false
      if rule.conc then
        local held = (tonumber(redis.call('HGET', fk('l'), g)) or 0) + mine.leased
        full = held >= rule.conc
        cap = math.min(cap, rule.conc - held)
      end
      if rule.rate and not mine.bucket then
        local t, since = string.match(redis.call('HGET', fk('b'), g) or '', '^([^:]+):(%d+)$')
        mine.bucket = refill(tonumber(t), tonumber(since), now, rule)
      end
      if rule.rate then cap = math.min(cap, math.floor(mine.bucket)) end
      if cap < 1 then -- out of room: it waits for one of its leases to end, or for a token
        turn_leave(g, true)
        if full then
          redis.call('SADD', fk('s'), g)
        else
          redis.call('ZADD', fk('w'), now + math.max(1, math.ceil(token_wait(mine.bucket, rule))), g)
        end
      else
        local popped = redis.call('ZPOPMIN', ready_key(g), cap)
        if #popped < 2 * cap then emptied[#emptied + 1] = g end -- its last due jobs
        for i = 1, #popped, 2 do members[#members + 1], owners[#owners + 1] = popped[i], g end
        mine.popped = mine.popped + #popped / 2
      end
    end
    take(members, owners, now, call, got)
    local served = {}
    for _, g in ipairs(heads) do -- to the end of the line, in the order served
      local k = got[g]
      if k then
        local mine = touched[g]
        mine.leased = mine.leased + k
        if mine.bucket then mine.bucket = mine.bucket - k end
        turns = turns + 1
        served[#served + 1], served[#served + 2] = turns, g
      end
    end
    if #served > 0 then redis.call('ZADD', fk('t'), 'XX', unpack(served)) end
    for _, g in ipairs(emptied) do turn_leave(g) end
  end
  local queued = 0
  for _, g in ipairs(order) do
    local mine = touched[g]
    if mine.popped > 0 then group_left(g, mine.popped, true) end
    if g ~= '' then queued = queued + mine.popped end
    if mine.leased > 0 and flags_have('g') then
      redis.call('HINCRBY', fk('l'), g, mine.leased)
    end
    if mine.bucket then redis.call('HSET', fk('b'), g, mine.bucket .. ':' .. now) end
  end
  local writes = {'turns', turns}
  if queued > 0 then redis.call('HINCRBY', f, 'queued', -queued) end
  if flags_have('t') then writes[3], writes[4] = 'leased', live + call.n end
  if tokens then
    local w = #writes
    writes[w + 1], writes[w + 2], writes[w + 3], writes[w + 4] = 'tokens', tokens - call.n,
      'since', now
  end
  redis.call('HSET', f, unpack(writes))
  return call.n
end

-- When a token lets a job of this shard go (ms), or nil: the topic's bucket
-- when it is empty, else the first group waiting for one.
local function flow_next_at(now)
  local st = redis.call('HMGET', fk('f'), 'tokens', 'since', 'rule', 'shard')
  local shard, shards = string.match(st[4] or '0:1', '^(%d+):(%d+)$')
  local topic = rule_share(rule_of(st[3]), tonumber(shard), tonumber(shards), 0)
  if topic.rate then
    local tokens = refill(tonumber(st[1]), tonumber(st[2]), now, topic)
    if tokens < 1 then return now + math.ceil(token_wait(tokens, topic)) end
  end
  local first = redis.call('ZRANGE', fk('w'), 0, 0, 'WITHSCORES')[2]
  return first and tonumber(first)
end
