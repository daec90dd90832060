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
    /// over): nothing was changed. [`Error::Store`] when the store failed: the release is then
    /// tried again in the background (pauses from 50 ms doubling up to 500 ms) until the lease's
    /// [local deadline](Self::local_deadline), and a retry that gets through is reported as
    /// [`LockEvent::Released`](crate::LockEvent::Released); otherwise the lease ends at
    /// `lock_until` by itself.
    pub async fn release(mut self) -> Result<(), Error> {
        self.armed = false;
        release_lease(&self.service, &self.lease, self.local_deadline).await
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

/// The first pause before a release cut by a store error is tried again; each failed retry
/// doubles it, up to [`RELEASE_RETRY_MAX`].
const RELEASE_RETRY_FIRST: Duration = Duration::from_millis(50);

/// The longest pause between two retries of a cut release: a store back from an outage frees
/// the lock within about this long (plus a round trip), well before the next tick of a job
/// that fires every second.
const RELEASE_RETRY_MAX: Duration = Duration::from_millis(500);

/// Releases `lease`, reporting the outcome as an event.
///
/// When the store fails (an [`Error::Store`]: the connection was cut, the store is down), the
/// failure is reported once ([`LockEvent::ReleaseFailed`], and returned), and the release is
/// tried again in the background while the lease may still be this holder's: until `until`,
/// its local deadline. The pauses start at 50 ms and double up to 500 ms, each shortened or
/// lengthened by up to a fifth at random. A retry that gets through is reported as
/// [`LockEvent::Released`]; the retries that fail are logged at debug level only, and giving up
/// at `until` once as a warning (the lease then ends at `lock_until` by itself). Every store's
/// release is conditional on the holder and the fencing token, so a retry after an attempt the
/// store did apply (its answer lost) changes nothing: it answers "not ours", and the retries
/// stop quietly. A refusal ([`Error::LockLost`]) is not retried.
pub(crate) async fn release_lease(
    service: &Arc<LockService>,
    lease: &LockLease,
    until: Instant,
) -> Result<(), Error> {
    let result = match service.provider.release(lease).await {
        Ok(true) => Ok(()),
        Ok(false) => Err(Error::LockLost {
            lock_name: lease.name().to_owned(),
        }),
        Err(error) => Err(error),
    };
    match &result {
        Ok(()) => service.emit(LockEvent::Released(lease)),
        Err(error) => {
            service.emit(LockEvent::ReleaseFailed { lease, error });
            if matches!(error, Error::Store { .. }) {
                retry_release(Arc::clone(service), lease.clone(), until);
            }
        }
    }
    result
}

/// Tries the release of `lease` again in the background (see [`release_lease`]) until `until`.
fn retry_release(service: Arc<LockService>, lease: LockLease, until: Instant) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    if Instant::now() >= until {
        return;
    }
    runtime.spawn(async move {
        let mut pause = RELEASE_RETRY_FIRST;
        let mut attempts = 0u32;
        loop {
            let at = Instant::now() + jittered(pause);
            if at >= until {
                break;
            }
            tokio::time::sleep_until(at).await;
            attempts += 1;
            // An attempt the store does not answer ends with the lease: it is not ours then.
            match tokio::time::timeout_at(until, service.provider.release(&lease)).await {
                Ok(Ok(true)) => {
                    tracing::debug!(
                        lock = lease.name(),
                        token = lease.fencing_token(),
                        attempts,
                        "lock released on a retry after a store failure"
                    );
                    service.emit(LockEvent::Released(&lease));
                    return;
                }
                Ok(Ok(false)) => {
                    // Already released (an earlier attempt was applied, its answer lost), or
                    // expired and taken: nothing of ours is left to give back.
                    tracing::debug!(
                        lock = lease.name(),
                        token = lease.fencing_token(),
                        "lock release retried: the lease is no longer held by this instance"
                    );
                    return;
                }
                Ok(Err(error)) => {
                    tracing::debug!(
                        lock = lease.name(), token = lease.fencing_token(), attempts,
                        error = %error, "lock release retry failed"
                    );
                    pause = (pause * 2).min(RELEASE_RETRY_MAX);
                }
                Err(_) => break,
            }
        }
        tracing::warn!(
            lock = lease.name(),
            token = lease.fencing_token(),
            attempts,
            "lock release not confirmed while the lease could still be held; it expires at \
             lock_until"
        );
    });
}

/// `pause`, shortened or lengthened by up to a fifth at random, so that instances cut off
/// together do not retry in step.
fn jittered(pause: Duration) -> Duration {
    use std::hash::BuildHasher;
    // Each `RandomState` is keyed afresh: its hash of a constant is a random number.
    let random = std::collections::hash_map::RandomState::new().hash_one(0u8);
    let fifth = pause / 5;
    let spread = u64::try_from(fifth.as_nanos() * 2)
        .unwrap_or(u64::MAX)
        .max(1);
    pause - fifth + Duration::from_nanos(random % spread)
}

impl Drop for Lock {
    fn drop(&mut self) {
        if self.armed {
            release_in_background(
                Arc::clone(&self.service),
                self.lease.clone(),
                self.local_deadline,
            );
        }
    }
}

/// Releases on the current tokio runtime without waiting: the path for dropped handles and
/// cancelled tasks, since Rust has no async drop.
pub(crate) fn release_in_background(service: Arc<LockService>, lease: LockLease, until: Instant) {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => {
            runtime.spawn(async move {
                // The outcome is reported through events and logs inside.
                let _ = release_lease(&service, &lease, until).await;
            });
        }
        Err(_) => tracing::warn!(
            lock = lease.name(),
            "lock dropped outside a tokio runtime; it expires at lock_until"
        ),
    }
}
