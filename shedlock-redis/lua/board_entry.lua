-- The board's keys and entries (see src/board/mod.rs): KEYS[1] entries (hash: key -> entry),
-- KEYS[2] index (sorted set of the keys, every score 0, so that ZRANGEBYLEX reads a prefix in
-- bytewise order), KEYS[3] version (the counter every write INCRs).
-- An entry is '<version>:<written_at ms>:<expires_at ms, empty: kept until removed>:<value>'.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- The version, times and value of `entry` (a field of KEYS[1] at `key`); an error reply
-- naming the key when it is not what these scripts write.
local function parse(key, entry)
  local version, written, expires = string.match(entry, '^(%d+):(%d+):(%d*):')
  if not version then
    return nil, redis.error_reply('CORRUPT board entry `' .. key .. '` in `' .. KEYS[1] ..
      '`: not `<version>:<written_at>:<expires_at>:<value>` as shedlock writes it; nothing ' ..
      'was changed (delete the field to drop the entry)')
  end
  local value = string.sub(entry, #version + #written + #expires + 4)
  return { version = version, written = written, expires = expires, value = value }
end

-- Whether a parsed entry is past its expiry on this server's clock.
local function expired(parsed)
  return parsed.expires ~= '' and tonumber(parsed.expires) <= now
end

-- Deletes the entry at `key` from the hash and the index.
local function drop(key)
  redis.call('HDEL', KEYS[1], key)
  redis.call('ZREM', KEYS[2], key)
end

-- The live entry at `key` (parsed), nil when there is none (an expired one is deleted), or
-- nil and an error reply.
local function live(key)
  local entry = redis.call('HGET', KEYS[1], key)
  if not entry then
    return nil
  end
  local parsed, err = parse(key, entry)
  if not parsed then
    return nil, err
  end
  if expired(parsed) then
    drop(key)
    return nil
  end
  return parsed
end

-- Whether `condition` ('always', 'absent', 'version') holds for `current` (parsed or nil);
-- `version` is the decimal version asked for.
local function holds(current, condition, version)
  if condition == 'always' then
    return true
  elseif condition == 'absent' then
    return current == nil
  end
  return current ~= nil and current.version == version
end
