-- After run_keep.lua. ARGV[12] heartbeat lease ms, or '' for none. Replies the run's record
-- (JSON): the one found, or the one written now.
local found = redis.call('HGET', KEYS[1], ARGV[1])
if found then
  return found
end
local run = started_now()
local lease = tonumber(ARGV[12])
if lease then
  run.alive_until = string.format('%d', now + lease)
end
local record = cjson.encode(run)
redis.call('HSET', KEYS[1], ARGV[1], record)
index_run()
keep()
-- The keys expire a retention after this write; a heartbeat longer than that keeps them.
if lease and lease > tonumber(ARGV[8]) then
  for i = 1, 3 do
    redis.call('PEXPIRE', KEYS[i], lease)
  end
end
return record
