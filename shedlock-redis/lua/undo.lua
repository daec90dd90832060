local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'prev_holder', 'prev_token',
  'prev_locked_at', 'prev_lock_until', 'prev_last_tick')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] then
  return 0
end
if s[4] then
  redis.call('HSET', KEYS[1], 'holder', s[3], 'token', s[4], 'locked_at', s[5],
    'lock_until', s[6])
  -- The tick this grant claimed goes back too: votes split among instances claiming one tick
  -- must leave it claimable for their retries.
  if s[7] then
    redis.call('HSET', KEYS[1], 'last_tick', s[7])
  else
    redis.call('HDEL', KEYS[1], 'last_tick')
  end
  redis.call('HDEL', KEYS[1], 'prev_holder', 'prev_token', 'prev_locked_at', 'prev_lock_until',
    'prev_last_tick')
else
  redis.call('DEL', KEYS[1])
end
return 1
