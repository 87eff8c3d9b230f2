-- release: a waiter stops waiting; if it held the shard's timer, hand the timing
-- to another waiter (one wake token: it reserves, finds nothing, takes the timer).
-- KEYS: the shard keys (see prelude).
-- ARGV: [1] event cap, [2] waiter token
-- Returns: 1 when the timer was released, else 0.
-- Events: none.
local held = redis.call('GET', K_TIMER)
if not held or string.match(held, '^%d+:(.*)$') ~= ARGV[2] then return 0 end
redis.call('DEL', K_TIMER)
wake(1)
return 1
