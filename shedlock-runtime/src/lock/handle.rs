//! The handle of an acquired lock.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::{Error, LockEvent, LockLease, LockListener, LockProvider};
use shedlock_core::__private as lock_config;

/// What every [`Lock`] of one executor shares: the store and the listeners.
pub(crate) struct LockService {
    pub(crate) provider: Arc<dyn LockProvider>,
    pub(crate) listeners: Vec<Arc<dyn LockListener>>,
}

impl LockService {
    /// Whether both lock through the same provider instance: the same `Arc` behind them (clones
    /// of one executor, executors built from one `Arc<dyn LockProvider>`, and their
    /// `with_listener` variants). Two providers that merely point at one database are distinct:
    /// they may act as different holders.
    pub(crate) fn same_store(&self, other: &LockService) -> bool {
        std::ptr::addr_eq(Arc::as_ptr(&self.provider), Arc::as_ptr(&other.provider))
    }

    pub(crate) fn emit(&self, event: LockEvent<'_>) {
        crate::metrics::lock_event(&event);
        match &event {
            LockEvent::Attempt { lock_name } => tracing::trace!(lock = lock_name, "acquiring"),
            LockEvent::Acquired(lease) => tracing::debug!(
                lock = lease.name(),
                holder = lease.holder(),
                token = lease.fencing_token(),
                "lock acquired"
            ),
            LockEvent::Skipped { lock_name } => {
                tracing::debug!(lock = lock_name, "lock held elsewhere, skipped")
            }
            LockEvent::AcquireFailed { lock_name, error } => tracing::warn!(
                lock = lock_name, error = %error, "lock acquisition failed, not executed this time"
            ),
            LockEvent::Released(lease) => tracing::debug!(
                lock = lease.name(),
                holder = lease.holder(),
                token = lease.fencing_token(),
                "lock released"
            ),
            LockEvent::ReleaseFailed { lease, error } => tracing::warn!(
                lock = lease.name(), holder = lease.holder(), token = lease.fencing_token(),
                error = %error, "lock release failed"
            ),
            LockEvent::Extended(lease) => tracing::debug!(
                lock = lease.name(),
                holder = lease.holder(),
                token = lease.fencing_token(),
                "lock extended"
            ),
            LockEvent::ExtendFailed { lease, error } => tracing::warn!(
                lock = lease.name(), holder = lease.holder(), token = lease.fencing_token(),
                error = %error, "lock extension failed"
            ),
            LockEvent::Lost(lease) => tracing::warn!(
                lock = lease.name(),
                holder = lease.holder(),
                token = lease.fencing_token(),
                "lock lost: the lease can no longer be trusted"
            ),
        }
        for listener in &self.listeners {
            listener.on_event(&event);
        }
    }
}

impl fmt::Debug for LockService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockService")
            .field("provider", &self.provider)
            .field("listeners", &self.listeners.len())
            .finish()
    }
}

/// Until when a lease requested at `requested_at` for `lock_at_most_for` is trusted on this
/// process's monotonic clock: `lock_at_most_for` after the request was sent, less an allowance
/// of 1% of the lease plus 2 ms (at most half the lease). The store's expiry counts from a moment
/// after the request was sent, so it cannot come sooner, except that the store's clock may run a
/// little faster than this one, store timestamps are rounded, and timers fire up to a millisecond
/// late: the allowance covers those, so a job is told its lease is lost before another instance
/// can be granted it.
pub(crate) fn trusted_until(requested_at: Instant, lock_at_most_for: Duration) -> Instant {
    let allowance = (lock_at_most_for / 100 + Duration::from_millis(2)).min(lock_at_most_for / 2);
    requested_at + (lock_at_most_for - allowance)
}

/// An acquired lock. Release it with [`Lock::release`]; extend it with [`Lock::extend`].
///
/// Rust has no async drop: a `Lock` dropped without being released is released in the
/// background on the current tokio runtime (if there is none, its lease simply expires at
/// `lock_until`).
#[derive(Debug)]
pub struct Lock {
    service: Arc<LockService>,
    lease: LockLease,
    local_deadline: Instant,
    armed: bool,
}

impl Lock {
    pub(crate) fn new(service: Arc<LockService>, lease: LockLease, requested_at: Instant) -> Self {
        let local_deadline = trusted_until(requested_at, lease.lock_at_most_for());
        Lock {
            service,
            lease,
            local_deadline,
            armed: true,
        }
    }

    /// The lease as the store recorded it.
    pub fn lease(&self) -> &LockLease {
        &self.lease
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        self.lease.name()
    }

    /// The fencing token of this acquisition.
    pub fn fencing_token(&self) -> u64 {
        self.lease.fencing_token()
    }

    /// Who holds the lock (this instance).
    pub fn holder(&self) -> &str {
        self.lease.holder()
    }

    /// When the store granted the lease (store clock).
    pub fn locked_at(&self) -> SystemTime {
        self.lease.locked_at()
    }

    /// When the lease ends unless extended (store clock).
    pub fn lock_until(&self) -> SystemTime {
        self.lease.lock_until()
    }

    /// The instant, on this process's monotonic clock, after which the lease must no longer be
    /// trusted: `lock_at_most_for` after the moment the acquire or extend request was sent, less
    /// a clock allowance of 1% of the lease plus 2 ms (at most half the lease): the store's clock
    /// may run a little faster than this one and its timestamps are rounded.
    pub fn local_deadline(&self) -> Instant {
        self.local_deadline
    }

    /// Releases the lock; it stays taken until `locked_at + lock_at_least_for` if that is later.
    ///
    /// # Errors
    /// [`Error::LockLost`] when the lease was no longer this holder's (it expired and was taken
    /// over): nothing was changed. [`Error::Store`] when the store failed; the lease then ends at
    /// `lock_until` by itself.
    pub async fn release(mut self) -> Result<(), Error> {
        self.armed = false;
        release_lease(&self.service, &self.lease).await
    }

    /// Extends the lease to `lock_at_most_for` from now (store clock).
    ///
    /// Returns the renewed lock (same fencing token) and consumes this one, so the old handle
    /// cannot be used again. Returns `Ok(None)` when the lease expired, was released or was taken
    /// over, and when the store's confirmation arrived after the renewed lease's local deadline
    /// (reported as [`LockEvent::Lost`](crate::LockEvent::Lost); the lease is then released in
    /// the background in case it is still this holder's).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for invalid durations; [`Error::Store`] when the store failed (the
    /// lock is then released in the background, as on drop).
    pub async fn extend(
        mut self,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<Lock>, Error> {
        let extended = extend_lease(
            &self.service,
            &self.lease,
            lock_at_most_for,
            lock_at_least_for,
        )
        .await?;
        self.armed = false;
        let Some((lease, requested_at)) = extended else {
            return Ok(None);
        };
        let renewed = Lock::new(Arc::clone(&self.service), lease, requested_at);
        if Instant::now() >= renewed.local_deadline {
            // Confirmed too late to trust (a pause, a slow answer): another instance may hold it
            // by now. Dropping the armed handle gives it back if it is still ours.
            self.service.emit(LockEvent::Lost(&renewed.lease));
            return Ok(None);
        }
        Ok(Some(renewed))
    }
}

/// Extends `lease`; on success returns the new lease and when the request was sent.
/// `Ok(None)`: the store refused (lease expired, released or taken over).
pub(crate) async fn extend_lease(
    service: &LockService,
    lease: &LockLease,
    lock_at_most_for: Duration,
    lock_at_least_for: Duration,
) -> Result<Option<(LockLease, Instant)>, Error> {
    lock_config::validate_durations(lock_at_most_for, lock_at_least_for)?;
    let requested_at = Instant::now();
    match service
        .provider
        .extend(lease, lock_at_most_for, lock_at_least_for)
        .await
    {
        Ok(Some(extended)) => {
            service.emit(LockEvent::Extended(&extended));
            Ok(Some((extended, requested_at)))
        }
        Ok(None) => {
            let error = Error::LockLost {
                lock_name: lease.name().to_owned(),
            };
            service.emit(LockEvent::ExtendFailed {
                lease,
                error: &error,
            });
            Ok(None)
        }
        Err(error) => {
            service.emit(LockEvent::ExtendFailed {
                lease,
                error: &error,
            });
            Err(error)
        }
    }
}

/// Releases `lease`, reporting the outcome as an event.
pub(crate) async fn release_lease(service: &LockService, lease: &LockLease) -> Result<(), Error> {
    let result = match service.provider.release(lease).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(Error::LockLost {
            lock_name: lease.name().to_owned(),
        }),
        Err(error) => Err(error),
    };
    match &result {
        Ok(()) => service.emit(LockEvent::Released(lease)),
        Err(error) => service.emit(LockEvent::ReleaseFailed { lease, error }),
    }
    result
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.armed {
            release_in_background(Arc::clone(&self.service), self.lease.clone());
        }
    }
}

/// Releases on the current tokio runtime without waiting: the path for dropped handles and
/// cancelled tasks, since Rust has no async drop.
pub(crate) fn release_in_background(service: Arc<LockService>, lease: LockLease) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move {
                // The outcome is reported through events and logs inside.
                let _ = release_lease(&service, &lease).await;
            });
        }
        Err(_) => tracing::warn!(
            lock = lease.name(),
            "lock dropped outside a tokio runtime; it expires at lock_until"
        ),
    }
}
