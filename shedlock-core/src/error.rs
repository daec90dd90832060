//! The one error type of the crate.

use std::fmt;

/// A boxed error from a store or a job, kept as the `source` of an [`Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Everything that can go wrong in shedlock.
///
/// "Lock not acquired" is not an error: acquisition returns `Ok(None)` and the
/// runtime's executor returns `TaskResult::Skipped`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A configuration value was rejected; `field` names it.
    #[error("invalid `{field}`: {message}")]
    InvalidConfig {
        /// The field (or macro argument) that holds the bad value.
        field: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The lock store failed (connection lost, SQL error, missing table, …).
    #[error("lock store failed to {operation} lock `{lock_name}`: {source}")]
    Store {
        /// What was attempted.
        operation: Operation,
        /// The lock the operation was for.
        lock_name: String,
        /// The store's own error.
        #[source]
        source: BoxError,
    },
    /// Code asked for the current lock but runs outside any locked execution.
    #[error(
        "no lock is held by the current task (call this inside `LockingTaskExecutor::execute` or a locked job)"
    )]
    NoActiveLock,
    /// The lease can no longer be trusted: it expired, was released, or was taken over.
    #[error("lock `{lock_name}` is no longer held by this instance")]
    LockLost {
        /// The lock whose lease was lost.
        lock_name: String,
    },
    /// The scheduler could not be started or was used after shutdown.
    #[error("scheduler: {0}")]
    Scheduler(String),
}

impl Error {
    /// Builds an [`Error::InvalidConfig`].
    pub fn invalid_config(field: &'static str, message: impl Into<String>) -> Self {
        Error::InvalidConfig {
            field,
            message: message.into(),
        }
    }

    /// Builds an [`Error::Store`] from any store error.
    pub fn store(
        operation: Operation,
        lock_name: impl Into<String>,
        source: impl Into<BoxError>,
    ) -> Self {
        Error::Store {
            operation,
            lock_name: lock_name.into(),
            source: source.into(),
        }
    }
}

/// The store operation that failed, carried by [`Error::Store`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
    /// Acquiring a lock.
    Acquire,
    /// Releasing a lock.
    Release,
    /// Extending a lock.
    Extend,
    /// Creating or checking the store's schema.
    Schema,
    /// Reading lock state (status, fencing guard).
    Read,
    /// Writing or reading run records.
    Runs,
    /// Writing or reading the fleet's jobs and switches (a [`Board`](crate::Board)).
    Jobs,
}

impl Operation {
    /// A short, stable name of the operation (`acquire`, `release`, `extend`, `schema`,
    /// `read`, `runs`, `jobs`): a label for metrics and logs.
    pub fn label(&self) -> &'static str {
        match self {
            Operation::Acquire => "acquire",
            Operation::Release => "release",
            Operation::Extend => "extend",
            Operation::Schema => "schema",
            Operation::Read => "read",
            Operation::Runs => "runs",
            Operation::Jobs => "jobs",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Operation::Acquire => "acquire",
            Operation::Release => "release",
            Operation::Extend => "extend",
            Operation::Schema => "set up the schema for",
            Operation::Read => "read",
            Operation::Runs => "read or write the run records of",
            Operation::Jobs => "read or write the fleet's jobs at",
        })
    }
}
