-- KEYS[1] records, KEYS[2] started (see run_keep.lua). ARGV[1] earliest start ms ('-inf':
-- any), ARGV[2] most records (-1: all). Replies {id, JSON or false, id, JSON, ...}, newest
-- first (by start, then id: token and attempt, zero-padded).
local ids = redis.call('ZREVRANGEBYSCORE', KEYS[2], '+inf', ARGV[1], 'LIMIT', 0, ARGV[2])
local reply = {}
for i = 1, #ids, 1000 do
  local batch = {unpack(ids, i, math.min(i + 999, #ids))}
  local records = redis.call('HMGET', KEYS[1], unpack(batch))
  for j = 1, #batch do
    reply[#reply + 1] = batch[j]
    reply[#reply + 1] = records[j]
  end
end
return reply
