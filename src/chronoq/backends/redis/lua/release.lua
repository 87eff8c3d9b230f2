-- release: a waiter stops waiting; if it held the shard's timer, hand the timing
-- to another waiter (one wake token: it reserves, finds nothing, takes the timer).
-- KEYS: the shard keys (see prelude).
-- ARGV: [1] event cap, [2] waiter token
-- Returns: 1 when the timer was released, else 0.
-- Events: none.
if give_up_timer(ARGV[2]) then return 1 end
return 0
