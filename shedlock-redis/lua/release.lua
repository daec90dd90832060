local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'locked_at', 'lock_until')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] then
  return 0
end
for i = 3, 4 do
  if not (s[i] and #s[i] <= 16 and string.find(s[i], '^%d+$') and tonumber(s[i]) < 2 ^ 53) then
    return redis.error_reply('CORRUPT lock hash `' .. KEYS[1] .. '`: field `' ..
      (i == 3 and 'locked_at' or 'lock_until') .. '` is missing or not a whole number below 2^53; ' ..
      'nothing was changed')
  end
end
if tonumber(s[4]) <= now then
  return 0
end
local lock_until = math.max(now, tonumber(s[3]) + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'lock_until', string.format('%d', lock_until))
if lock_until == now and ARGV[4] ~= '' then
  redis.call('PUBLISH', ARGV[4], ARGV[5])
end
return 1
