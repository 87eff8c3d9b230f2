-- handover: a waiter stops waiting; if it held the shard's timer, hand the timing
-- to another waiter (one wake token: it reserves, finds nothing, takes the timer).
-- The consumer's own release of a job is nack.lua's; this hands on no job.
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap, [2] waiter token
-- Returns: 1 when it held the timer (now handed on), else 0.
-- Events: none.
if hand_over_timer(ARGV[2]) then return 1 end
return 0
