-- One lock per KEYS[i]: a single acquire is a batch of one. TIME is read once for the batch.
local t = redis.call('TIME')
local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(now_us / 1000)
local now_text = string.format('%d', now_us)
local holder, tolerance = ARGV[1], tonumber(ARGV[2]) or 0
local names = {'token', 'locked_at', 'lock_until', 'holder'}

-- A lock's error is its own entry, not an error reply: the other locks of the batch are
-- answered (and may already be written), and each checks all it reads before its first write.
local function failed(message)
  return {-3, message}
end

-- `a`: the index of the lock's first argument (lease ms, window ms, proposed token, tick ms,
-- tick spacing ms, tick ahead ms).
local function acquire(key, a)
  local read = redis.pcall('HMGET', key, 'token', 'locked_at', 'lock_until', 'holder',
    'last_tick')
  if read.err then
    return failed(read.err)
  end
  local s = read
  local v = {0, false, 0}
  if s[1] or s[2] or s[3] or s[4] then
    for i = 1, 4 do
      local x = s[i]
      if not x or (i < 4 and not (#x <= 16 and string.find(x, '^%d+$') and tonumber(x) < 2 ^ 53)) then
        return failed('CORRUPT lock hash `' .. key .. '`: field `' .. names[i] ..
          (i < 4 and '` is missing or not a whole number below 2^53' or '` is missing') ..
          '; nothing was changed (delete the key to reset the lock: tokens stay above the ' ..
          'earlier ones)')
      end
      v[i] = tonumber(x)
    end
  end
  local token, locked_at, lock_until = v[1], v[2], v[3]
  if lock_until > now or (locked_at and locked_at + tonumber(ARGV[a + 1]) > now) then
    return {0, s[1], now, s[4], now_text}
  end
  -- No last_tick (a hash written before ticks, or never granted a tick): every tick follows it.
  local last_tick = s[5]
  local tick = ARGV[a + 3]
  if tick ~= '' then
    if last_tick and not (#last_tick <= 17 and string.find(last_tick, '^%-?%d+$') and
        math.abs(tonumber(last_tick)) < 2 ^ 53) then
      return failed('CORRUPT lock hash `' .. key .. '`: field `last_tick` is not a whole ' ..
        'number within 2^53; nothing was changed (delete the field to forget the last tick)')
    end
    local at = tonumber(tick)
    if (last_tick and at < tonumber(last_tick) + tonumber(ARGV[a + 4])) or
        at > now + tonumber(ARGV[a + 5]) then
      return {-2, '0', now, '', now_text}
    end
  end
  local floor = math.max(token + 1, now_us)
  local proposed = tonumber(ARGV[a + 2])
  if not proposed or proposed < 0 or proposed >= 2 ^ 53 then
    return failed('ERR proposed token ' .. tostring(ARGV[a + 2]) .. ' is out of range')
  elseif proposed == 0 then
    proposed = floor
  elseif proposed <= token or proposed < now_us - tolerance then
    return {-1, string.format('%d', floor), now, '', now_text}
  else
    if s[1] then
      redis.call('HSET', key, 'prev_holder', s[4], 'prev_token', s[1], 'prev_locked_at', s[2],
        'prev_lock_until', s[3])
      if last_tick then
        redis.call('HSET', key, 'prev_last_tick', last_tick)
      else
        redis.call('HDEL', key, 'prev_last_tick')
      end
    else
      redis.call('HDEL', key, 'prev_holder', 'prev_token', 'prev_locked_at', 'prev_lock_until',
        'prev_last_tick')
    end
  end
  local until_ms = now + tonumber(ARGV[a])
  redis.call('HSET', key, 'holder', holder, 'token', string.format('%d', proposed),
    'locked_at', string.format('%d', now), 'lock_until', string.format('%d', until_ms))
  if tick ~= '' then
    redis.call('HSET', key, 'last_tick', tick)
  end
  return {1, string.format('%d', proposed), now, until_ms, now_text}
end

local replies = {}
for i = 1, #KEYS do
  replies[i] = acquire(KEYS[i], 3 + (i - 1) * 6)
end
return replies
