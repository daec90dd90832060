//! What stores keep of their run records unless configured, the check of a store builder's
//! settings and the builders' setters: the same defaults and rules on every store.

use std::time::Duration;

use crate::Error;

/// How long a store keeps run records unless its builder's `run_retention` says otherwise:
/// two weeks.
pub const DEFAULT_RUN_RETENTION: Duration = Duration::from_secs(14 * 24 * 60 * 60);

/// How many run records of one lock a store keeps (the newest) unless its builder's
/// `runs_per_lock` says otherwise.
pub const DEFAULT_RUNS_PER_LOCK: u32 = 1000;

/// How far past its bounds a store's run history may run between two trims. Every store keeps,
/// for every lock and whatever the order in which locks end, at most `runs_per_lock +
/// RUN_TRIM_SLACK` records of a lock, and deletes a record older than `run_retention` (on any
/// lock, even one that never runs again) at the latest when the same provider has recorded
/// `RUN_TRIM_SLACK` more ends. The conformance suite checks both.
pub const RUN_TRIM_SLACK: u32 = 16;

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

/// The `run_retention` and `runs_per_lock` setters of a store builder, which keeps them in
/// fields of the same names (`Duration` and `u32`, starting at [`DEFAULT_RUN_RETENTION`] and
/// [`DEFAULT_RUNS_PER_LOCK`]). Each setter's doc is the sentence every store shares, then the
/// store's own lines (how it deletes old records), given before the setter's name:
///
/// ```ignore
/// impl MyLockProviderBuilder {
///     shedlock_core::run_retention_setters! {
///         /// Older ones are deleted as runs end.
///         run_retention;
///         runs_per_lock;
///     }
/// }
/// ```
#[doc(hidden)]
#[macro_export]
macro_rules! run_retention_setters {
    (
        $(#[$retention_doc:meta])*
        run_retention;
        $(#[$per_lock_doc:meta])*
        runs_per_lock;
    ) => {
        /// How long run records ([`RunLog`](shedlock_core::RunLog)) are kept; default 14 days.
        $(#[$retention_doc])*
        pub fn run_retention(mut self, retention: ::core::time::Duration) -> Self {
            self.run_retention = retention;
            self
        }

        /// How many run records of one lock are kept, the newest; default 1000.
        $(#[$per_lock_doc])*
        pub fn runs_per_lock(mut self, runs: u32) -> Self {
            self.runs_per_lock = runs;
            self
        }
    };
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

    #[derive(Debug)]
    struct Builder {
        run_retention: Duration,
        runs_per_lock: u32,
    }

    // The setters are `pub` for the stores' public builders.
    #[allow(unreachable_pub)]
    impl Builder {
        crate::run_retention_setters! {
            run_retention;
            runs_per_lock;
        }
    }

    #[test]
    fn setters_set_the_fields_of_their_names() {
        let builder = Builder {
            run_retention: DEFAULT_RUN_RETENTION,
            runs_per_lock: DEFAULT_RUNS_PER_LOCK,
        }
        .run_retention(Duration::from_secs(60))
        .runs_per_lock(5);
        assert_eq!(builder.run_retention, Duration::from_secs(60));
        assert_eq!(builder.runs_per_lock, 5);
    }
}
