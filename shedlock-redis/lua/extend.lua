local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'lock_until')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] then
  return {0}
end
if not (s[3] and #s[3] <= 16 and string.find(s[3], '^%d+$') and tonumber(s[3]) < 2 ^ 53) then
  return redis.error_reply('CORRUPT lock hash `' .. KEYS[1] .. '`: field `lock_until` is ' ..
    'missing or not a whole number below 2^53; nothing was changed')
end
if tonumber(s[3]) <= now then
  return {0}
end
local lock_until = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'lock_until', string.format('%d', lock_until))
return {1, lock_until}
