-- After run_keep.lua. Replies the run's record (JSON): the one found, or the one written now.
local found = redis.call('HGET', KEYS[1], ARGV[1])
if found then
  return found
end
local record = cjson.encode(started_now())
redis.call('HSET', KEYS[1], ARGV[1], record)
redis.call('ZADD', KEYS[2], now, ARGV[1])
keep()
return record
