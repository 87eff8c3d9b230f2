-- lib/4_batched.lua: batched writes, many elements in few commands.
-- Defines: CHUNK, MAX_WAKE_TOKENS, SKIPLIST_MEMBER, SKIPLIST_BATCH, call_chunked,
--   zadd_many, wake.
-- Uses (1_keys): K_WAKE.
-- Python twin: none (the waiting side of the wake list is core.py's BLPOP).

local CHUNK = 500 -- elements per unpack(): Lua's C stack is limited
local MAX_WAKE_TOKENS = 64

-- A variadic command over a long list, CHUNK arguments at a time (CHUNK is
-- even, so score/member and field/value pairs stay together).
local function call_chunked(command, key, list)
  for first = 1, #list, CHUNK do
    redis.call(command, key, unpack(list, first, math.min(first + CHUNK - 1, #list)))
  end
end

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
