-- KEYS[1] records, KEYS[2] started, KEYS[3] index (see run_keep.lua). ARGV[1] run id,
-- ARGV[2] heartbeat lease ms.
-- Renews the heartbeat of a run still running whose heartbeat has not passed (TIME): sets
-- `alive_until` to now + lease, makes the keys live at least that long (they expire a
-- retention after their last write), and replies 1. Replies 0, writing nothing, for a record
-- that ended, whose heartbeat passed, or that is missing.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local found = redis.call('HGET', KEYS[1], ARGV[1])
if not found then
  return 0
end
local ok, run = pcall(cjson.decode, found)
if not ok or type(run) ~= 'table' then
  return redis.error_reply('CORRUPT run record `' .. KEYS[1] .. '` field `' .. ARGV[1] ..
    '`: not the JSON object shedlock writes; nothing was changed (delete the field to ' ..
    'drop the record)')
end
if run.outcome ~= 'running' then
  return 0
end
if run.alive_until ~= nil and (tonumber(run.alive_until) or 0) <= now then
  return 0
end
local lease = tonumber(ARGV[2])
run.alive_until = string.format('%d', now + lease)
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(run))
for i = 1, 3 do
  if redis.call('PTTL', KEYS[i]) < lease then
    redis.call('PEXPIRE', KEYS[i], lease)
  end
end
return 1
