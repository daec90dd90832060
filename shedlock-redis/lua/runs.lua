-- Reads a page of runs, newest first (by start ms, then member: token and attempt,
-- zero-padded), without reading more of the index than the page needs.
-- KEYS[1] the index read: a lock's `started` zset (ARGV[6] = '': members are run ids, the
-- records are in KEYS[2]) or the `index` of every lock (ARGV[6] = the runs key prefix:
-- members are '<run id>:<lock>', the records are in '<prefix>records:<lock>').
-- ARGV[1] earliest start ms ('-inf': any); ARGV[2] most records (-1: all);
-- ARGV[3] newest start ms read ('+inf', '<ms>' or '(<ms>'); ARGV[4] a start ms whose runs
-- are read first, those whose '<run id>:<lock>' sorts below ARGV[5] (bytes, as Redis sorts
-- members) ('': none): the page after a cursor that fell on a whole millisecond; ARGV[7]
-- the lock of a lock's `started` zset.
-- Replies {member, JSON, member, JSON, ...}; a member whose record is gone is skipped.
local key, want, records_prefix = KEYS[1], tonumber(ARGV[2]), ARGV[6]
local reply, count = {}, 0

-- Adds a member's record to the reply; true once the page is full.
local function emit(member)
  local json
  if records_prefix == '' then
    json = redis.call('HGET', KEYS[2], member)
  else
    json = redis.call('HGET', records_prefix .. 'records:' .. string.sub(member, 33),
      string.sub(member, 1, 31))
  end
  if json then
    reply[#reply + 1] = member
    reply[#reply + 1] = json
    count = count + 1
  end
  return want >= 0 and count >= want
end

-- Whether `a` sorts below `b` byte by byte (Lua's `<` follows the server's locale).
local function below(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then
      return x < y
    end
  end
  return #a < #b
end

-- The members at exactly `score` whose '<run id>:<lock>' sorts below `bound`, newest first;
-- true once the page is full.
local function emit_tied(score, bound)
  local tied = redis.call('ZRANGEBYSCORE', key, score, score)
  for i = #tied, 1, -1 do
    local place = tied[i]
    if records_prefix == '' then
      place = place .. ':' .. ARGV[7]
    end
    if below(place, bound) and emit(tied[i]) then
      return true
    end
  end
  return false
end

if want == 0 then
  return reply
end
if ARGV[4] ~= '' and emit_tied(ARGV[4], ARGV[5]) then
  return reply
end
local newest, batch = ARGV[3], want
if want < 0 then
  batch = 1000
end
while true do
  local members = redis.call('ZREVRANGEBYSCORE', key, newest, ARGV[1], 'WITHSCORES', 'LIMIT',
    0, batch)
  for i = 1, #members, 2 do
    if emit(members[i]) then
      return reply
    end
  end
  if #members < 2 * batch then
    return reply
  end
  -- Records were missing (the page is not full): go on after the last member read.
  local last, score = members[#members - 1], members[#members]
  if records_prefix == '' then
    last = last .. ':' .. ARGV[7]
  end
  if emit_tied(score, last) then
    return reply
  end
  newest = '(' .. score
end
