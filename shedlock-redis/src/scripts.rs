//! The Lua scripts: every lock operation is one script, run atomically by Redis on its own clock.
//!
//! A lock is one hash with no expiry, `<prefix><name>`, fields `holder`, `token`, `locked_at`
//! and `lock_until` (milliseconds since the epoch, from Redis `TIME`), and `last_tick` once a
//! [tick](shedlock_core::Tick) was granted. The hash outlives the lease on purpose: its `token`
//! is the floor of the next one, its `locked_at` is what
//! [`unless_acquired_within`](shedlock_core::LockConfiguration::unless_acquired_within)
//! compares, and its `last_tick` must refuse a tick whose holder died long after the lease
//! ended. One field in the hash that is kept anyway costs no key, no expiry and no second
//! write per lock, however many locks there are. A lease is live while `lock_until > TIME`, so
//! expiry is decided by Redis's clock, the same clock a `PX` expiry would use.
//!
//! Every number is kept as a decimal string and read back only if it is a whole number below
//! 2^53, which Lua's numbers (doubles) hold exactly; anything else in an existing lock hash is
//! an error reply starting `CORRUPT`, sent before the script writes anything (Redis does not
//! roll a script back, so no script writes before its last check). Tokens travel as strings
//! too, so a caller that turns them into text gets every digit.

use std::sync::LazyLock;

use redis::Script;

/// `KEYS[i]` lock i of a batch; `ARGV`: holder, tolerance µs (RedLock), then six per lock:
/// lease ms, window ms, proposed token (0: the store picks it), tick ms (`''`: no tick), tick
/// spacing ms, tick ahead ms. A single acquire is a batch of one: one script, one shape.
///
/// Each lock is decided as if alone, in the order given, on one `TIME` read for the whole
/// batch. Redis runs the script atomically, so the order is no lock order: two batches never
/// wait on each other. On Redis Cluster a script's keys must share one hash slot: the provider
/// groups a batch by slot there.
///
/// A tick is granted (with the lock free) only if `last_tick + spacing <= tick <= TIME in ms +
/// ahead`, and kept as `last_tick` with the grant; a hash without `last_tick` (written before
/// ticks, or never granted one) takes any tick within its ahead bound. Without a tick,
/// `last_tick` is neither read nor written; release and extend never touch it.
///
/// The token of a grant is at least `max(stored token + 1, TIME in µs)`: strictly above the
/// previous one, and, as long as the server's clock does not go back, above every token
/// granted before the hash was deleted or lost. With a proposal (RedLock) the grant takes the
/// proposal if it is above the stored token and at most `tolerance` µs behind `TIME`.
///
/// Replies one entry per lock: `{1, token, now ms, lock_until ms, now µs}` when granted, `{0,
/// token, now ms, holder, now µs}` when held or acquired within the window, `{-2, '0', now ms,
/// '', now µs}` when the tick is refused, `{-1, floor, now ms, '', now µs}` when the proposal
/// was behind (`floor`: the lowest proposal it would have taken), `{-3, 'CODE detail'}` when
/// that lock cannot be read (`CORRUPT`, `WRONGTYPE`): an entry, not an error reply, since the
/// locks before it may already be granted.
/// A grant of a proposed token keeps the previous lease and last tick in `prev_*` fields, for
/// [`UNDO`] to restore when the other masters did not grant it too.
pub(crate) static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/acquire.lua")));

/// `KEYS[i]` lock i; `ARGV`: holder, then the token of each lock. Takes back the grants of a
/// RedLock attempt that failed (no majority, or too late), for one lock or a batch: restores the lease before it, token, `locked_at` and
/// `last_tick` included, so a failed attempt leaves no recent acquisition and no spent tick
/// behind.
/// Replies, per lock, 1 when the grant was still there, else 0.
pub(crate) static UNDO: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/undo.lua")));

/// `KEYS[1]` lock; `ARGV`: holder, token, `lock_at_least_for` ms, hint channel, lock name.
///
/// Replies 1 when the live lease matched holder and token (now ending at
/// `max(now, locked_at + lock_at_least_for)`; the name is published on the channel if that is
/// now), else 0.
pub(crate) static RELEASE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/release.lua")));

/// `KEYS[1]` lock; `ARGV`: holder, token, lease ms.
///
/// Replies `{1, lock_until}` when the live lease matched holder and token (now ending at
/// `now + lease`), else `{0}`.
pub(crate) static EXTEND: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/extend.lua")));

/// `KEYS[1]` lock. Replies `{holder, token, locked_at, lock_until, now}` (strings; `false`
/// for missing fields) or an empty array when the key does not exist.
pub(crate) static STATE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/state.lua")));

/// A number as the scripts keep it: decimal digits only, below 2^53 (exact in Lua's doubles).
pub(crate) fn stored_number(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 16 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok().filter(|&number| number < 1 << 53)
}

/// What one server answered to an acquisition; `now_us` is its clock (µs since the epoch).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AcquireReply {
    /// Granted with `token`; times in ms of the server's clock.
    Granted {
        token: u64,
        now_ms: u64,
        lock_until_ms: u64,
        now_us: u64,
    },
    /// Held by `holder` with `token`, or acquired by it within the window.
    Refused {
        token: u64,
        holder: String,
        now_us: u64,
    },
    /// The proposed token was behind: `floor` is the lowest proposal the server would take.
    TokenBehind { floor: u64, now_us: u64 },
    /// The lock is free but its tick is refused: not after the last tick granted by the
    /// spacing, or too far ahead of the server's clock.
    TickRefused { now_us: u64 },
}

impl AcquireReply {
    /// One lock's entry of the acquire script's reply: `Err` with the script's error for it.
    pub(crate) fn parse(reply: &[redis::Value]) -> Option<Result<Self, String>> {
        if redis::from_redis_value_ref::<i64>(reply.first()?).ok()? == -3 {
            return Some(Err(redis::from_redis_value_ref(reply.get(1)?).ok()?));
        }
        Self::parse_answer(reply).map(Ok)
    }

    fn parse_answer(reply: &[redis::Value]) -> Option<Self> {
        let number = |i: usize| redis::from_redis_value_ref::<u64>(reply.get(i)?).ok();
        let now_us = number(4)?;
        match redis::from_redis_value_ref::<i64>(reply.first()?).ok()? {
            1 => Some(AcquireReply::Granted {
                token: number(1)?,
                now_ms: number(2)?,
                lock_until_ms: number(3)?,
                now_us,
            }),
            0 => Some(AcquireReply::Refused {
                token: number(1)?,
                holder: redis::from_redis_value_ref(reply.get(3)?).ok()?,
                now_us,
            }),
            -1 => Some(AcquireReply::TokenBehind {
                floor: number(1)?,
                now_us,
            }),
            -2 => Some(AcquireReply::TickRefused { now_us }),
            _ => None,
        }
    }

    /// The server's clock when it answered, µs since the epoch.
    pub(crate) fn now_us(&self) -> u64 {
        match self {
            AcquireReply::Granted { now_us, .. }
            | AcquireReply::Refused { now_us, .. }
            | AcquireReply::TokenBehind { now_us, .. }
            | AcquireReply::TickRefused { now_us } => *now_us,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_numbers_are_plain_digits_below_2_pow_53() {
        assert_eq!(stored_number("0"), Some(0));
        assert_eq!(
            stored_number("1795586506951802"),
            Some(1_795_586_506_951_802)
        );
        assert_eq!(stored_number("9007199254740991"), Some((1 << 53) - 1));
        for bad in [
            "",
            "+5",
            "-5",
            " 7",
            "1.5",
            "1e3",
            "9007199254740992",
            "18446744073709551616",
        ] {
            assert_eq!(stored_number(bad), None, "{bad:?}");
        }
    }
}
