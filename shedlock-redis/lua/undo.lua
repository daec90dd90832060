-- One grant per KEYS[i], its token ARGV[i + 1]: a single undo is a batch of one.
local holder = ARGV[1]
local replies = {}
for i = 1, #KEYS do
  local key = KEYS[i]
  local s = redis.call('HMGET', key, 'holder', 'token', 'prev_holder', 'prev_token',
    'prev_locked_at', 'prev_lock_until', 'prev_last_tick')
  if s[1] ~= holder or s[2] ~= ARGV[i + 1] then
    replies[i] = 0
  else
    if s[4] then
      redis.call('HSET', key, 'holder', s[3], 'token', s[4], 'locked_at', s[5],
        'lock_until', s[6])
      -- The tick this grant claimed goes back too: votes split among instances claiming one
      -- tick must leave it claimable for their retries.
      if s[7] then
        redis.call('HSET', key, 'last_tick', s[7])
      else
        redis.call('HDEL', key, 'last_tick')
      end
      redis.call('HDEL', key, 'prev_holder', 'prev_token', 'prev_locked_at', 'prev_lock_until',
        'prev_last_tick')
    else
      redis.call('DEL', key)
    end
    replies[i] = 1
  end
end
return replies
