//! What stores keep of their run records unless configured, and the check of a store
//! builder's settings: the same defaults and rules on every store.

use std::time::Duration;

use crate::Error;

/// How long a store keeps run records unless its builder's `run_retention` says otherwise:
/// two weeks.
pub const DEFAULT_RUN_RETENTION: Duration = Duration::from_secs(14 * 24 * 60 * 60);

/// How many run records of one lock a store keeps (the newest) unless its builder's
/// `runs_per_lock` says otherwise.
pub const DEFAULT_RUNS_PER_LOCK: u32 = 1000;

/// Checks a store builder's `run_retention` (at least a millisecond) and `runs_per_lock` (at
/// least one).
///
/// # Errors
/// [`Error::InvalidConfig`] naming `run_retention` or `runs_per_lock`.
pub fn validate_run_retention(retention: Duration, runs_per_lock: u32) -> Result<(), Error> {
    if retention < Duration::from_millis(1) {
        return Err(Error::invalid_config(
            "run_retention",
            "must be at least a millisecond",
        ));
    }
    if runs_per_lock == 0 {
        return Err(Error::invalid_config(
            "runs_per_lock",
            "must keep at least one run record per lock",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_are_checked_naming_the_field() {
        assert!(validate_run_retention(DEFAULT_RUN_RETENTION, DEFAULT_RUNS_PER_LOCK).is_ok());
        let field = |retention, per_lock| match validate_run_retention(retention, per_lock) {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(Duration::from_micros(999), 1), "run_retention");
        assert_eq!(field(Duration::from_secs(1), 0), "runs_per_lock");
    }
}
