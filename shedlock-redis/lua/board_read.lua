-- After board_entry.lua. ARGV[1] prefix.
-- Replies {key, entry, key, entry, …}: the live entries whose key starts with the prefix, in
-- bytewise key order (the index's lexicographic range: UTF-8 text never holds the byte 0xff,
-- so '(<prefix>\255' bounds every key starting with the prefix). Expired entries met on the
-- way are deleted, and so is an index member without its entry, once every entry read was
-- found sound (an error reply comes before any change).
local low, high = '-', '+'
if ARGV[1] ~= '' then
  low, high = '[' .. ARGV[1], '(' .. ARGV[1] .. '\255'
end
local keys = redis.call('ZRANGEBYLEX', KEYS[2], low, high)
local reply, gone = {}, {}
-- HMGET by chunks: Lua's unpack takes a bounded number of arguments.
local chunk = 1000
for first = 1, #keys, chunk do
  local last = math.min(first + chunk - 1, #keys)
  local entries = redis.call('HMGET', KEYS[1], unpack(keys, first, last))
  for i = first, last do
    local key, entry = keys[i], entries[i - first + 1]
    if not entry then
      gone[#gone + 1] = key
    else
      local parsed, err = parse(key, entry)
      if not parsed then
        return err
      end
      if expired(parsed) then
        gone[#gone + 1] = key
      else
        reply[#reply + 1] = key
        reply[#reply + 1] = entry
      end
    end
  end
end
for _, key in ipairs(gone) do
  drop(key)
end
return reply
