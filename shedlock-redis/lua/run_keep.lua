-- Shared head of run_started.lua and run_finished.lua (prepended to each).
-- KEYS[1] records (hash: run id -> JSON), KEYS[2] started (zset: run id by start ms),
-- KEYS[3] index (zset: '<run id>:<lock>' by start ms, every lock's runs).
-- ARGV[1] run id, ARGV[2] lock, ARGV[3] job, ARGV[4] tick ms or '', ARGV[5] holder,
-- ARGV[6] token, ARGV[7] attempt, ARGV[8] retention ms, ARGV[9] runs per lock,
-- ARGV[10] runs key prefix, ARGV[11] most old records of other locks deleted by one write.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kinds = {'hash', 'zset', 'zset'}
for i = 1, 3 do
  local kind = redis.call('TYPE', KEYS[i]).ok
  if kind ~= 'none' and kind ~= kinds[i] then
    return redis.error_reply('WRONGTYPE key `' .. KEYS[i] .. '` is a ' .. kind ..
      ', not the run records\' ' .. kinds[i] .. '; nothing was changed')
  end
end

-- The record of a run begun now, still running.
local function started_now()
  local run = {job = ARGV[3], holder = ARGV[5], token = ARGV[6], attempt = ARGV[7],
    started_at = string.format('%d', now), outcome = 'running'}
  if ARGV[4] ~= '' then run.tick = ARGV[4] end
  return run
end

-- Adds this run (started now) to its lock's index and to the index of every lock.
local function index_run()
  redis.call('ZADD', KEYS[2], now, ARGV[1])
  redis.call('ZADD', KEYS[3], now, ARGV[1] .. ':' .. ARGV[2])
end

-- Deletes this lock's runs `ids` from the three keys, a thousand at a time (unpack has a
-- limit).
local function forget(ids)
  for i = 1, #ids, 1000 do
    local batch = {unpack(ids, i, math.min(i + 999, #ids))}
    redis.call('HDEL', KEYS[1], unpack(batch))
    redis.call('ZREM', KEYS[2], unpack(batch))
    for j = 1, #batch do
      batch[j] = batch[j] .. ':' .. ARGV[2]
    end
    redis.call('ZREM', KEYS[3], unpack(batch))
  end
end

-- Whether run `id` in the records hash `records` runs under a heartbeat that has not passed:
-- its instance still runs it (and stops if its record goes), so the bounds keep it until it
-- ends or its heartbeat passes.
local function live(records, id)
  local json = redis.call('HGET', records, id)
  if not json then
    return false
  end
  local ok, run = pcall(cjson.decode, json)
  return ok and type(run) == 'table' and run.outcome == 'running' and run.alive_until ~= nil and
    (tonumber(run.alive_until) or 0) > now
end

-- The ids of this lock's runs `ids` that are not live.
local function not_live(ids)
  local kept = {}
  for _, id in ipairs(ids) do
    if not live(KEYS[1], id) then
      kept[#kept + 1] = id
    end
  end
  return kept
end

-- Keeps what the retention allows. This lock: records started within it, the newest `runs
-- per lock` (so a lock never holds more, whatever other locks do). Every lock: the oldest
-- runs of the index that are past the retention, at most ARGV[11] of them, so that a lock
-- that never runs again loses its old records too, at a bounded cost per write. A run that
-- is live (running, heartbeat not passed) stays past both bounds until it ends or its
-- heartbeat passes. Every key expires a retention after its last write (then all its
-- records are older).
local function keep()
  local retention, per_lock = tonumber(ARGV[8]), tonumber(ARGV[9])
  local cutoff = '(' .. string.format('%d', now - retention)
  forget(not_live(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', cutoff)))
  local extra = redis.call('ZCARD', KEYS[2]) - per_lock
  if extra > 0 then
    forget(not_live(redis.call('ZRANGE', KEYS[2], 0, extra - 1)))
  end
  local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', cutoff, 'LIMIT', 0, ARGV[11])
  local swept = {}
  for _, member in ipairs(old) do
    -- '<20-digit token>:<10-digit attempt>:<lock>'
    local id, lock = string.sub(member, 1, 31), string.sub(member, 33)
    local records = ARGV[10] .. 'records:' .. lock
    if not live(records, id) then
      redis.call('HDEL', records, id)
      redis.call('ZREM', ARGV[10] .. 'started:' .. lock, id)
      swept[#swept + 1] = member
    end
  end
  if #swept > 0 then
    redis.call('ZREM', KEYS[3], unpack(swept))
  end
  -- Runs written without the index (by an older version, or before a lost index key) are
  -- indexed at their lock's next write: the index holds the lock's oldest run, or all of them
  -- are added.
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)
  if oldest[1] and not redis.call('ZSCORE', KEYS[3], oldest[1] .. ':' .. ARGV[2]) then
    local runs = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
    for i = 1, #runs, 2 do
      redis.call('ZADD', KEYS[3], runs[i + 1], runs[i] .. ':' .. ARGV[2])
    end
  end
  for i = 1, 3 do
    redis.call('PEXPIRE', KEYS[i], retention)
  end
end
