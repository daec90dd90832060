//! The Lua scripts: every lock operation is one script, run atomically by Redis on its own clock.
//!
//! A lock is one hash with no expiry, `<prefix><name>`, fields `holder`, `token`, `locked_at`
//! and `lock_until` (milliseconds since the epoch, from Redis `TIME`). The hash outlives the
//! lease on purpose: its `token` is the counter the next acquisition increments, and its
//! `locked_at` is what [`unless_acquired_within`](shedlock_core::LockConfiguration::unless_acquired_within)
//! compares. A lease is live while `lock_until > TIME`, so expiry is decided by Redis's clock,
//! the same clock a `PX` expiry would use.

use std::sync::LazyLock;

use redis::Script;

/// `KEYS[1]` lock; `ARGV`: holder, lease ms, window ms, proposed token (0: the next one).
///
/// Replies `{1, token, now, lock_until}` when granted, `{0, token, now, holder}` when held or
/// acquired within the window, `{-1, token, now}` when the proposed token is not above the
/// stored one.
/// A grant of a proposed token (RedLock) keeps the previous lease in `prev_*` fields, for
/// [`UNDO`] to restore when the other masters did not grant it too.
pub(crate) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
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
",
    )
});

/// `KEYS[1]` lock; `ARGV`: holder, token. Takes back a grant of a RedLock attempt that failed
/// (no majority, or too late): restores the lease before it, token and `locked_at` included,
/// so a failed attempt leaves neither a gap in the tokens nor a recent acquisition behind.
/// Replies 1 when the grant was still there, else 0.
pub(crate) static UNDO: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'prev_holder', 'prev_token',
  'prev_locked_at', 'prev_lock_until')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] then
  return 0
end
if s[4] then
  redis.call('HSET', KEYS[1], 'holder', s[3], 'token', s[4], 'locked_at', s[5],
    'lock_until', s[6])
  redis.call('HDEL', KEYS[1], 'prev_holder', 'prev_token', 'prev_locked_at', 'prev_lock_until')
else
  redis.call('DEL', KEYS[1])
end
return 1
",
    )
});

/// `KEYS[1]` lock; `ARGV`: holder, token, `lock_at_least_for` ms, hint channel, lock name.
///
/// Replies 1 when the live lease matched holder and token (now ending at
/// `max(now, locked_at + lock_at_least_for)`; the name is published on the channel if that is
/// now), else 0.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'locked_at', 'lock_until')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] or (tonumber(s[4]) or 0) <= now then
  return 0
end
local lock_until = math.max(now, tonumber(s[3]) + tonumber(ARGV[3]))
redis.call('HSET', KEYS[1], 'lock_until', string.format('%d', lock_until))
if lock_until == now and ARGV[4] ~= '' then
  redis.call('PUBLISH', ARGV[4], ARGV[5])
end
return 1
",
    )
});

/// `KEYS[1]` lock; `ARGV`: holder, token, lease ms.
///
/// Replies `{1, lock_until}` when the live lease matched holder and token (now ending at
/// `now + lease`), else `{0}`.
pub(crate) static EXTEND: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'lock_until')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] or (tonumber(s[3]) or 0) <= now then
  return {0}
end
local lock_until = now + tonumber(ARGV[3])
redis.call('HSET', KEYS[1], 'lock_until', string.format('%d', lock_until))
return {1, lock_until}
",
    )
});

/// `KEYS[1]` lock. Replies `{holder, token, locked_at, lock_until, now}` (strings; `false`
/// for missing fields) or an empty array when the key does not exist.
pub(crate) static STATE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
if redis.call('EXISTS', KEYS[1]) == 0 then
  return {}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'locked_at', 'lock_until')
return {s[1], s[2], s[3], s[4], string.format('%d', now)}
",
    )
});

/// What one server answered to an acquisition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// Granted with `token`; times in ms of the server's clock.
    Granted {
        token: u64,
        now_ms: u64,
        lock_until_ms: u64,
    },
    /// Held by `holder` with `token`, or acquired by it within the window.
    Refused { token: u64, holder: String },
    /// The proposed token was not above the stored counter `token`.
    TokenBehind { token: u64 },
}

impl AcquireReply {
    pub(crate) fn parse(reply: &[redis::Value]) -> Option<Self> {
        let number = |i: usize| redis::from_redis_value_ref::<u64>(reply.get(i)?).ok();
        match redis::from_redis_value_ref::<i64>(reply.first()?).ok()? {
            1 => Some(AcquireReply::Granted {
                token: number(1)?,
                now_ms: number(2)?,
                lock_until_ms: number(3)?,
            }),
            0 => Some(AcquireReply::Refused {
                token: number(1)?,
                holder: redis::from_redis_value_ref(reply.get(3)?).ok()?,
            }),
            -1 => Some(AcquireReply::TokenBehind { token: number(1)? }),
            _ => None,
        }
    }
}
