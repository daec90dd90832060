-- After board_entry.lua. ARGV[1] key, ARGV[2] value, ARGV[3] condition ('always', 'absent',
-- 'version'), ARGV[4] the version asked for (decimal; '' unless 'version'), ARGV[5] time to
-- live ms ('': kept until removed).
-- Writes the entry if the condition holds for the live entry at the key, with the next
-- version of the counter (above the key's stored version, even should the counter have been
-- lost), written now and expiring now + ttl; replies the version (decimal), or false when
-- the condition did not hold and nothing was written.
local current, err = live(ARGV[1])
if err then
  return err
end
if not holds(current, ARGV[3], ARGV[4]) then
  return false
end
local version = redis.call('INCR', KEYS[3])
if current and tonumber(current.version) >= version then
  version = tonumber(current.version) + 1
  redis.call('SET', KEYS[3], string.format('%d', version))
end
local expires = ''
if ARGV[5] ~= '' then
  expires = string.format('%d', now + tonumber(ARGV[5]))
end
local written = string.format('%d', version)
redis.call('HSET', KEYS[1], ARGV[1],
  written .. ':' .. string.format('%d', now) .. ':' .. expires .. ':' .. ARGV[2])
redis.call('ZADD', KEYS[2], 0, ARGV[1])
return written
