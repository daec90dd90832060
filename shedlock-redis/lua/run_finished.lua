-- After run_keep.lua. ARGV[12] outcome, ARGV[13] error text (absent: none).
-- Replies 1 when the end was recorded, 0 when the record had ended already (the first end
-- stays).
local found = redis.call('HGET', KEYS[1], ARGV[1])
local run
if found then
  local ok, decoded = pcall(cjson.decode, found)
  if not ok or type(decoded) ~= 'table' then
    return redis.error_reply('CORRUPT run record `' .. KEYS[1] .. '` field `' .. ARGV[1] ..
      '`: not the JSON object shedlock writes; nothing was changed (delete the field to ' ..
      'drop the record)')
  end
  if decoded.outcome ~= 'running' then
    return 0
  end
  run = decoded
else
  run = started_now()
  index_run()
end
run.finished_at = string.format('%d', now)
run.outcome = ARGV[12]
run.error = ARGV[13]
run.alive_until = nil
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(run))
keep()
return 1
