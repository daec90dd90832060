//! Lock events, for metrics and alerts.

use std::fmt;

use crate::{Error, LockLease};

/// Something that happened to a lock, reported to every [`LockListener`].
#[derive(Debug)]
#[non_exhaustive]
pub enum LockEvent<'a> {
    /// An acquisition is about to be asked of the store: every attempt is followed by one of
    /// `Acquired`, `Skipped` or `AcquireFailed` (or by `Lost` then `Skipped`, for an answer
    /// that came too late to be used).
    Attempt {
        /// The lock asked for.
        lock_name: &'a str,
    },
    /// The lock was acquired.
    Acquired(&'a LockLease),
    /// The lock was held elsewhere; the task did not run.
    Skipped {
        /// The lock that was busy.
        lock_name: &'a str,
    },
    /// Acquisition failed with a store error; the task did not run.
    AcquireFailed {
        /// The lock that could not be acquired.
        lock_name: &'a str,
        /// What the store said.
        error: &'a Error,
    },
    /// The lock was released.
    Released(&'a LockLease),
    /// Releasing failed. A store error is retried in the background until the lease's local
    /// deadline (a retry that gets through is reported as `Released`); otherwise the lease ends
    /// by itself at `lock_until`.
    ReleaseFailed {
        /// The lease that was being released.
        lease: &'a LockLease,
        /// What went wrong (a store error, or [`Error::LockLost`]).
        error: &'a Error,
    },
    /// The lease was extended.
    Extended(&'a LockLease),
    /// Extending failed or was refused.
    ExtendFailed {
        /// The lease that was being extended.
        lease: &'a LockLease,
        /// What went wrong (a store error, or [`Error::LockLost`] when refused).
        error: &'a Error,
    },
    /// The lease can no longer be trusted: the running task was signalled.
    Lost(&'a LockLease),
}

impl fmt::Display for LockEvent<'_> {
    /// One line for logs: `acquired `job` (holder a:1:b2c3, token 7)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let lease = |f: &mut fmt::Formatter<'_>, what: &str, lease: &LockLease| {
            write!(
                f,
                "{what} `{}` (holder {}, token {})",
                lease.name(),
                lease.holder(),
                lease.fencing_token()
            )
        };
        match self {
            LockEvent::Attempt { lock_name } => write!(f, "acquiring `{lock_name}`"),
            LockEvent::Acquired(l) => lease(f, "acquired", l),
            LockEvent::Skipped { lock_name } => write!(f, "skipped `{lock_name}`: held elsewhere"),
            LockEvent::AcquireFailed { lock_name, error } => {
                write!(f, "failed to acquire `{lock_name}`: {error}")
            }
            LockEvent::Released(l) => lease(f, "released", l),
            LockEvent::ReleaseFailed { lease: l, error } => {
                lease(f, "failed to release", l)?;
                write!(f, ": {error}")
            }
            LockEvent::Extended(l) => lease(f, "extended", l),
            LockEvent::ExtendFailed { lease: l, error } => {
                lease(f, "failed to extend", l)?;
                write!(f, ": {error}")
            }
            LockEvent::Lost(l) => lease(f, "lost", l),
        }
    }
}

/// Receives [`LockEvent`]s, e.g. to count skipped runs or export metrics.
///
/// Called synchronously on the task that caused the event: keep it fast.
/// Any `Fn(&LockEvent<'_>) + Send + Sync` closure is a listener.
pub trait LockListener: Send + Sync + 'static {
    /// Called once per event.
    fn on_event(&self, event: &LockEvent<'_>);
}

impl<F> LockListener for F
where
    F: Fn(&LockEvent<'_>) + Send + Sync + 'static,
{
    fn on_event(&self, event: &LockEvent<'_>) {
        self(event)
    }
}
