//! The narrow storage interface every lock store implements.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use crate::{Board, Error, LockConfiguration, LockInspector, RunLog};

/// A lock store: one attempt per call, never waiting for a lock to become free.
///
/// Implementations compute and compare lease times on the store's own clock
/// (`locked_at`, `lock_until`), never on the calling instance's clock.
/// Every provider must pass the conformance suite (the `shedlock-conformance` crate).
///
/// Most code does not call a provider directly but goes through the runtime's
/// `LockingTaskExecutor` (`shedlock-runtime`), which wraps leases in `Lock` handles and
/// reports events.
#[async_trait]
pub trait LockProvider: Send + Sync + Debug + 'static {
    /// Tries once to take the lock for this provider's holder.
    ///
    /// Returns `Ok(None)` when another holder's lease has not yet expired. On success the
    /// lease's fencing token is strictly greater than every earlier token of that lock name.
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error>;

    /// Tries once to take each lock of `configs` (distinct names), as
    /// [`acquire`](Self::acquire) does, and answers for each in order. The scheduler claims all the ticks an instance has due at
    /// one instant so; a store that can should take them in one round trip, in an order of its
    /// own that never deadlocks against another instance's batch (names sorted, say), and may
    /// answer every lock with an error when that round trip fails. The default takes them one
    /// by one, all at once.
    async fn acquire_many(
        &self,
        configs: &[LockConfiguration],
    ) -> Vec<Result<Option<LockLease>, Error>> {
        futures_util::future::join_all(configs.iter().map(|config| self.acquire(config))).await
    }

    /// Releases a lease, keeping the lock until `max(now, locked_at + lock_at_least_for)`.
    ///
    /// Matches holder **and** fencing token: returns `Ok(false)` (and changes nothing) when the
    /// lease is no longer this holder's, e.g. it expired and another holder took the lock.
    async fn release(&self, lease: &LockLease) -> Result<bool, Error>;

    /// Extends a live lease to `now + lock_at_most_for` (store time).
    ///
    /// Returns the renewed lease (same fencing token), or `Ok(None)` when the lease expired,
    /// was released or was taken over.
    async fn extend(
        &self,
        lease: &LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<LockLease>, Error>;

    /// The identity this provider acquires locks as.
    fn holder(&self) -> &str;

    /// A wake-up hint: a channel on which the store announces the names of released locks
    /// (e.g. PostgreSQL `LISTEN/NOTIFY`), so that waiting candidates can retry at once.
    ///
    /// Hints may be lost (a reconnect, a full channel); waiters must keep polling. The default
    /// is `None`: no hints, polling only.
    fn release_hints(&self) -> Option<tokio::sync::broadcast::Receiver<Arc<str>>> {
        None
    }

    /// The store's run records, if it keeps them beside its locks: the scheduler records every
    /// run of a locked job there. The default is `None`: no records.
    fn run_log(&self) -> Option<&dyn RunLog> {
        None
    }

    /// The store's read side (who holds which lock, until when), if it offers one: the
    /// scheduler reads it to tell a run whose holder died from one still going. The default is
    /// `None`; every provider of this workspace returns `Some`.
    fn inspector(&self) -> Option<&dyn LockInspector> {
        None
    }

    /// The store's board of the fleet's jobs ([`Fleet`](crate::Fleet)), if it keeps one beside
    /// its locks: a scheduler that publishes its jobs, the `shedlock jobs` command and the
    /// dashboard use it. The default is `None`; every provider of this workspace returns
    /// `Some`.
    fn board(&self) -> Option<&dyn Board> {
        None
    }
}

#[async_trait]
impl<P: LockProvider + ?Sized> LockProvider for Arc<P> {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        (**self).acquire(config).await
    }
    async fn acquire_many(
        &self,
        configs: &[LockConfiguration],
    ) -> Vec<Result<Option<LockLease>, Error>> {
        (**self).acquire_many(configs).await
    }
    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        (**self).release(lease).await
    }
    async fn extend(
        &self,
        lease: &LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<LockLease>, Error> {
        (**self)
            .extend(lease, lock_at_most_for, lock_at_least_for)
            .await
    }
    fn holder(&self) -> &str {
        (**self).holder()
    }
    fn release_hints(&self) -> Option<tokio::sync::broadcast::Receiver<Arc<str>>> {
        (**self).release_hints()
    }
    fn run_log(&self) -> Option<&dyn RunLog> {
        (**self).run_log()
    }
    fn inspector(&self) -> Option<&dyn LockInspector> {
        (**self).inspector()
    }
    fn board(&self) -> Option<&dyn Board> {
        (**self).board()
    }
}

/// A lease as the store recorded it: who holds which lock, with which token, until when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockLease {
    name: Arc<str>,
    holder: Arc<str>,
    fencing_token: u64,
    locked_at: SystemTime,
    lock_until: SystemTime,
    lock_at_most_for: Duration,
    lock_at_least_for: Duration,
}

impl LockLease {
    /// Describes a lease just granted for `config`. Called by providers.
    pub fn new(
        config: &LockConfiguration,
        holder: impl Into<Arc<str>>,
        fencing_token: u64,
        locked_at: SystemTime,
        lock_until: SystemTime,
    ) -> Self {
        LockLease {
            name: config.shared_name(),
            holder: holder.into(),
            fencing_token,
            locked_at,
            lock_until,
            lock_at_most_for: config.lock_at_most_for(),
            lock_at_least_for: config.lock_at_least_for(),
        }
    }

    /// The same lease after an extension: new `lock_until` and durations, same token.
    /// Called by providers.
    pub fn extended(
        &self,
        lock_until: SystemTime,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Self {
        LockLease {
            lock_until,
            lock_at_most_for,
            lock_at_least_for,
            ..self.clone()
        }
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Who holds the lease.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// The fencing token: strictly greater than every earlier token of this lock name.
    pub fn fencing_token(&self) -> u64 {
        self.fencing_token
    }

    /// When the store granted the lease (store clock).
    pub fn locked_at(&self) -> SystemTime {
        self.locked_at
    }

    /// When the lease ends unless extended or released (store clock).
    pub fn lock_until(&self) -> SystemTime {
        self.lock_until
    }

    /// The lease length requested at acquisition or last extension.
    pub fn lock_at_most_for(&self) -> Duration {
        self.lock_at_most_for
    }

    /// The minimum hold time honoured at release.
    pub fn lock_at_least_for(&self) -> Duration {
        self.lock_at_least_for
    }

    /// The lock's name, shared (no copy).
    pub fn shared_name(&self) -> Arc<str> {
        Arc::clone(&self.name)
    }
}
