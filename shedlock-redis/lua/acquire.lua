local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local s = redis.call('HMGET', KEYS[1], 'token', 'locked_at', 'lock_until', 'holder', 'last_tick')
local names = {'token', 'locked_at', 'lock_until', 'holder'}
local v = {0, false, 0}
if s[1] or s[2] or s[3] or s[4] then
  for i = 1, 4 do
    local x = s[i]
    if not x or (i < 4 and not (#x <= 16 and string.find(x, '^%d+$') and tonumber(x) < 2 ^ 53)) then
      return redis.error_reply('CORRUPT lock hash `' .. KEYS[1] .. '`: field `' .. names[i] ..
        (i < 4 and '` is missing or not a whole number below 2^53' or '` is missing') ..
        '; nothing was changed (delete the key to reset the lock: tokens stay above the ' ..
        'earlier ones)')
    end
    v[i] = tonumber(x)
  end
end
local token, locked_at, lock_until = v[1], v[2], v[3]
if lock_until > now or (locked_at and locked_at + tonumber(ARGV[3]) > now) then
  return {0, s[1], now, s[4], string.format('%d', now_us)}
end
-- No last_tick (a hash written before ticks, or never granted a tick): every tick follows it.
local last_tick = s[5]
local tick = ARGV[6]
if tick ~= '' then
  if last_tick and not (#last_tick <= 17 and string.find(last_tick, '^%-?%d+$') and
      math.abs(tonumber(last_tick)) < 2 ^ 53) then
    return redis.error_reply('CORRUPT lock hash `' .. KEYS[1] .. '`: field `last_tick` is ' ..
      'not a whole number within 2^53; nothing was changed (delete the field to forget the ' ..
      'last tick)')
  end
  local at = tonumber(tick)
  if (last_tick and at < tonumber(last_tick) + tonumber(ARGV[7])) or
      at > now + tonumber(ARGV[8]) then
    return {-2, '0', now, '', string.format('%d', now_us)}
  end
end
local floor = math.max(token + 1, now_us)
local proposed = tonumber(ARGV[4])
if not proposed or proposed < 0 or proposed >= 2 ^ 53 then
  return redis.error_reply('ERR proposed token ' .. tostring(ARGV[4]) .. ' is out of range')
elseif proposed == 0 then
  proposed = floor
elseif proposed <= token or proposed < now_us - (tonumber(ARGV[5]) or 0) then
  return {-1, string.format('%d', floor), now, '', string.format('%d', now_us)}
else
  if s[1] then
    redis.call('HSET', KEYS[1], 'prev_holder', s[4], 'prev_token', s[1], 'prev_locked_at', s[2],
      'prev_lock_until', s[3])
    if last_tick then
      redis.call('HSET', KEYS[1], 'prev_last_tick', last_tick)
    else
      redis.call('HDEL', KEYS[1], 'prev_last_tick')
    end
  else
    redis.call('HDEL', KEYS[1], 'prev_holder', 'prev_token', 'prev_locked_at', 'prev_lock_until',
      'prev_last_tick')
  end
end
local lock_until = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', string.format('%d', proposed),
  'locked_at', string.format('%d', now), 'lock_until', string.format('%d', lock_until))
if tick ~= '' then
  redis.call('HSET', KEYS[1], 'last_tick', tick)
end
return {1, string.format('%d', proposed), now, lock_until, string.format('%d', now_us)}
