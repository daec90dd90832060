-- After run_keep.lua. ARGV[12] heartbeat lease ms, or '' for none. Replies the run's record
-- (JSON): the one found, or the one written now.
local found = redis.call('HGET', KEYS[1], ARGV[1])
if found then
  return found
end
local run = started_now()
if ARGV[12] ~= '' then
  run.alive_until = string.format('%d', now + tonumber(ARGV[12]))
end
local record = cjson.encode(run)
redis.call('HSET', KEYS[1], ARGV[1], record)
index_run()
keep()
return record
