if redis.call('EXISTS', KEYS[1]) == 0 then
  return {}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'locked_at', 'lock_until')
return {s[1], s[2], s[3], s[4], string.format('%d', now)}
