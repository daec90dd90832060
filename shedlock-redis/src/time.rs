//! Times as Redis keeps them: whole milliseconds since the epoch, from `TIME` and in the
//! scripts' arguments.

use std::time::Duration;

/// A duration in whole milliseconds, rounded up (a lease is never shorter than asked).
/// Durations reaching the scripts are at most 100 years (the core validates them), far below
/// the 2^53 ms Lua numbers hold exactly.
pub(crate) fn millis(duration: Duration) -> u64 {
    let millis =
        duration.as_millis() + u128::from(!duration.subsec_nanos().is_multiple_of(1_000_000));
    u64::try_from(millis).unwrap_or(u64::MAX)
}

/// A Redis timestamp in milliseconds since the epoch, as a `SystemTime`.
pub(crate) fn system_time(millis: u64) -> std::time::SystemTime {
    std::time::UNIX_EPOCH + Duration::from_millis(millis)
}

/// A tick as the acquire script keeps it: its milliseconds within ±(2^53 − 1), exact in Lua's
/// doubles (a stored `last_tick` beyond that reads as corrupt). `Tick` keeps far less today;
/// were it to keep more, only ticks some 285,000 years from 1970 would move: one that far ahead
/// is refused by its ahead bound either way, one that far back stands for the earliest tick.
pub(crate) fn tick_millis(tick: &shedlock_core::Tick) -> i64 {
    const EXACT: i64 = (1 << 53) - 1;
    tick.millis().clamp(-EXACT, EXACT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_round_up() {
        assert_eq!(millis(Duration::from_micros(1)), 1);
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
        assert_eq!(millis(Duration::from_nanos(1_000_001)), 2);
    }

    #[test]
    fn ticks_stay_exact_in_lua() {
        let at = |millis: u64| std::time::UNIX_EPOCH + Duration::from_millis(millis);
        let tick = shedlock_core::Tick::new(at(1_795_586_506_951));
        assert_eq!(tick_millis(&tick), 1_795_586_506_951);
        let exact = -((1 << 53) - 1)..=(1 << 53) - 1;
        let far = shedlock_core::Tick::new(at(u64::MAX / 2));
        assert!(exact.contains(&tick_millis(&far)));
        let before = shedlock_core::Tick::new(std::time::UNIX_EPOCH - Duration::from_secs(1 << 50));
        assert!(exact.contains(&tick_millis(&before)));
    }
}
