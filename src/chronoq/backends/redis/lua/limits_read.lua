-- limits_read: a topic's limits as this shard holds them (every shard holds the same).
-- KEYS: the shard keys (see lib/1_keys.lua).
-- ARGV: [1] event cap
-- Returns: {the topic's rule, every group's default (chronoq.limits.Rule.pack; '' for
--   none), then group, rule pairs: each group's own}.
-- Events: none (a read).
local f = redis.call('HMGET', K_READY .. '>f', 'rule', 'default')
local out = {f[1] or '', f[2] or ''}
local own = redis.call('HGETALL', K_READY .. '>r')
for i = 1, #own do out[#out + 1] = own[i] end
return out
