local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'token', 'locked_at', 'lock_until', 'holder')
local token = tonumber(s[1]) or 0
local locked_at = tonumber(s[2])
if (tonumber(s[3]) or 0) > now or (locked_at and locked_at + tonumber(ARGV[3]) > now) then
  return {0, token, now, s[4] or ''}
end
local proposed = tonumber(ARGV[4])
if proposed == 0 then
  proposed = token + 1
elseif proposed <= token then
  return {-1, token, now}
end
if ARGV[4] ~= '0' then
  local p = redis.call('HMGET', KEYS[1], 'holder', 'token', 'locked_at', 'lock_until')
  if p[2] then
    redis.call('HSET', KEYS[1], 'prev_holder', p[1] or '', 'prev_token', p[2],
      'prev_locked_at', p[3] or '0', 'prev_lock_until', p[4] or '0')
  else
    redis.call('HDEL', KEYS[1], 'prev_holder', 'prev_token', 'prev_locked_at', 'prev_lock_until')
  end
end
local lock_until = now + tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'token', string.format('%d', proposed),
  'locked_at', string.format('%d', now), 'lock_until', string.format('%d', lock_until))
return {1, proposed, now, lock_until}
