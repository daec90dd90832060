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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn millis_round_up() {
        assert_eq!(millis(Duration::from_micros(1)), 1);
        assert_eq!(millis(Duration::from_millis(1500)), 1500);
        assert_eq!(millis(Duration::from_nanos(1_000_001)), 2);
    }
}
