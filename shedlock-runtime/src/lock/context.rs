//! The lock held by the running task: asserting it, extending it, reading its token, and the
//! lost-lock signal.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::lock::handle::{LockService, extend_lease, release_lease};
use crate::{Error, LockEvent, LockLease};

tokio::task_local! {
    /// The innermost lock held by the task; each links to the one it was taken inside.
    static CURRENT: Arc<ActiveLock>;
}

/// Runs `future` with `active` as the task's innermost held lock.
pub(crate) async fn scope<F: Future>(active: Arc<ActiveLock>, future: F) -> F::Output {
    CURRENT.scope(active, future).await
}

/// The innermost lock the current task holds that is named `name` and comes from the store of
/// `service` (see [`LockService::same_store`]): a nested execution of it is re-entrant.
pub(crate) fn enclosing(service: &LockService, name: &str) -> Option<Arc<ActiveLock>> {
    CURRENT
        .try_with(|innermost| {
            let mut held = Some(innermost);
            while let Some(lock) = held {
                if &*lock.name == name && lock.service.same_store(service) {
                    return Some(Arc::clone(lock));
                }
                held = lock.outer.as_ref();
            }
            None
        })
        .ok()
        .flatten()
}

/// A lease being used by a running task, shared by the executor, keep-alive and
/// [`LockContext`] handles.
#[derive(Debug)]
pub(crate) struct ActiveLock {
    name: Arc<str>,
    /// The lock the task held when this one was taken (nested executions).
    outer: Option<Arc<ActiveLock>>,
    service: Arc<LockService>,
    state: Mutex<LeaseState>,
    /// Woken at every confirmed extension, so keep-alive reschedules after one made by the task.
    renewed: tokio::sync::Notify,
    /// Serialises extensions and the final release.
    store_ops: tokio::sync::Mutex<()>,
    /// Created on first use: most runs never wait for the signal.
    cancel: OnceLock<CancellationToken>,
    /// The scheduler's stop request, if any.
    stop: Option<CancellationToken>,
    lost: AtomicBool,
    released: AtomicBool,
}

#[derive(Debug)]
struct LeaseState {
    lease: LockLease,
    /// When the request that granted or last extended the lease was sent.
    requested_at: Instant,
    local_deadline: Instant,
}

impl LeaseState {
    fn new(lease: LockLease, requested_at: Instant) -> Self {
        LeaseState {
            local_deadline: crate::lock::handle::trusted_until(
                requested_at,
                lease.lock_at_most_for(),
            ),
            lease,
            requested_at,
        }
    }
}

impl ActiveLock {
    /// A lease granted by a request sent at `requested_at`.
    pub(crate) fn new(
        service: Arc<LockService>,
        lease: LockLease,
        requested_at: Instant,
        stop: Option<CancellationToken>,
    ) -> Self {
        ActiveLock {
            name: lease.shared_name(),
            outer: CURRENT.try_with(Arc::clone).ok(),
            service,
            state: Mutex::new(LeaseState::new(lease, requested_at)),
            renewed: tokio::sync::Notify::new(),
            store_ops: tokio::sync::Mutex::new(()),
            cancel: OnceLock::new(),
            stop,
            lost: AtomicBool::new(false),
            released: AtomicBool::new(false),
        }
    }

    fn state(&self) -> MutexGuard<'_, LeaseState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn lease(&self) -> LockLease {
        self.state().lease.clone()
    }

    pub(crate) fn local_deadline(&self) -> Instant {
        self.state().local_deadline
    }

    pub(crate) fn is_lost(&self) -> bool {
        self.lost.load(Ordering::Acquire)
    }

    /// Marks the lease untrustworthy, logs it once, and signals the task.
    pub(crate) fn mark_lost(&self) {
        if !self.lost.swap(true, Ordering::AcqRel) {
            let lease = self.lease();
            self.service.emit(LockEvent::Lost(&lease));
        }
        self.cancel_token().cancel();
    }

    fn cancel_token(&self) -> &CancellationToken {
        self.cancel.get_or_init(CancellationToken::new)
    }

    /// Asks the task to stop (scheduler shutdown) without declaring the lease lost.
    pub(crate) fn request_stop(&self) {
        self.cancel_token().cancel();
    }

    /// Whether the task was asked to stop or the lease was lost.
    pub(crate) fn is_cancelled(&self) -> bool {
        self.cancel
            .get()
            .is_some_and(CancellationToken::is_cancelled)
            || self
                .stop
                .as_ref()
                .is_some_and(CancellationToken::is_cancelled)
    }

    /// Marks the lease lost if its local deadline has passed; returns whether it is lost.
    pub(crate) fn check_deadline(&self) -> bool {
        if !self.is_lost() && self.local_deadline() <= Instant::now() {
            self.mark_lost();
        }
        self.is_lost()
    }

    /// Whether the lease may still be acted on: not released, not lost, local deadline not
    /// passed (which marks it lost).
    pub(crate) fn is_trusted(&self) -> bool {
        !self.released.load(Ordering::Acquire) && !self.check_deadline()
    }

    /// When keep-alive should extend next: `interval` (at most half the current lease, which the
    /// task may have shortened) after the latest confirmed request or the latest attempt.
    pub(crate) fn next_extension(
        &self,
        interval: Duration,
        last_attempt: Option<Instant>,
    ) -> Instant {
        let state = self.state();
        let step = interval.min(state.lease.lock_at_most_for() / 2);
        last_attempt.map_or(state.requested_at, |at| at.max(state.requested_at)) + step
    }

    /// Completes at the next confirmed extension; register (`enable`) before reading the state.
    pub(crate) fn renewed(&self) -> tokio::sync::futures::Notified<'_> {
        self.renewed.notified()
    }

    pub(crate) async fn extend(
        &self,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<(), Error> {
        let _serialised = self.store_ops.lock().await;
        // Released: a context kept past its execution must not revive the lock.
        if self.released.load(Ordering::Acquire) || self.check_deadline() {
            return Err(self.lost_error());
        }
        let lease = self.lease();
        match extend_lease(&self.service, &lease, lock_at_most_for, lock_at_least_for).await? {
            Some((lease, requested_at)) => {
                *self.state() = LeaseState::new(lease, requested_at);
                self.renewed.notify_waiters();
                // Confirmed after its own local deadline (a slow answer), or after the old one
                // passed meanwhile: not a lease to act on.
                if self.check_deadline() {
                    return Err(self.lost_error());
                }
                Ok(())
            }
            None => {
                self.mark_lost();
                Err(self.lost_error())
            }
        }
    }

    /// Releases the lease (honouring `lock_at_least_for`), once: later calls wait for the first
    /// to finish and return `Ok(false)`. `Ok(true)` when this call released it.
    pub(crate) async fn release(&self) -> Result<bool, Error> {
        // Uncontended in the common case: skip the async acquire.
        let _serialised = match self.store_ops.try_lock() {
            Ok(guard) => guard,
            Err(_) => self.store_ops.lock().await,
        };
        if self.released.swap(true, Ordering::AcqRel) {
            return Ok(false);
        }
        if let Some(cancel) = self.cancel.get() {
            cancel.cancel();
        }
        release_lease(&self.service, &self.lease(), self.local_deadline())
            .await
            .map(|()| true)
    }

    pub(crate) fn lost_error(&self) -> Error {
        Error::LockLost {
            lock_name: self.name.to_string(),
        }
    }

    /// Completes when the lease is lost (or the task is asked to stop), watching the local
    /// deadline as it goes.
    pub(crate) async fn cancelled(&self) {
        loop {
            let deadline = self.local_deadline();
            let stop = async {
                match &self.stop {
                    Some(stop) => stop.cancelled().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                () = self.cancel_token().cancelled() => return,
                () = stop => return,
                () = tokio::time::sleep_until(deadline) => {
                    if self.check_deadline() {
                        return;
                    }
                }
            }
        }
    }
}

/// The lock held by a running task: its name, fencing token and holder; extension; and the
/// lost-lock signal.
///
/// Locked jobs receive one as a parameter; any code running inside
/// [`LockingTaskExecutor::execute`](crate::LockingTaskExecutor::execute) reaches the innermost
/// held lock with [`LockContext::current`].
#[derive(Debug, Clone)]
pub struct LockContext {
    pub(crate) active: Arc<ActiveLock>,
}

impl LockContext {
    pub(crate) fn new(active: Arc<ActiveLock>) -> Self {
        LockContext { active }
    }

    /// The provider that granted the lease: where the run holding it writes its run record.
    pub(crate) fn provider(&self) -> &Arc<dyn crate::LockProvider> {
        &self.active.service.provider
    }

    /// The innermost lock held by the current task.
    ///
    /// # Errors
    /// [`Error::NoActiveLock`] outside any locked execution.
    pub fn current() -> Result<LockContext, Error> {
        CURRENT
            .try_with(|active| LockContext::new(Arc::clone(active)))
            .map_err(|_| Error::NoActiveLock)
    }

    /// Fails unless the current task runs under a lock whose lease is still trusted
    /// (ShedLock's `LockAssert.assertLocked()`).
    ///
    /// # Errors
    /// [`Error::NoActiveLock`] outside a locked execution; [`Error::LockLost`] when the lease was
    /// lost.
    pub fn assert_locked() -> Result<(), Error> {
        let context = Self::current()?;
        if context.active.check_deadline() {
            return Err(context.active.lost_error());
        }
        Ok(())
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.active.name
    }

    /// The fencing token of this acquisition: pass it to the resource you write, which should
    /// reject writes carrying a smaller token than one it has seen.
    pub fn fencing_token(&self) -> u64 {
        self.active.state().lease.fencing_token()
    }

    /// Who holds the lock (this instance).
    pub fn holder(&self) -> String {
        self.active.state().lease.holder().to_owned()
    }

    /// When the lease ends unless extended (store clock, as last confirmed).
    pub fn lock_until(&self) -> SystemTime {
        self.active.state().lease.lock_until()
    }

    /// The lease as last confirmed by the store.
    pub fn lease(&self) -> LockLease {
        self.active.lease()
    }

    /// Extends the lease to `lock_at_most_for` from now (ShedLock's `LockExtender`).
    ///
    /// # Errors
    /// [`Error::LockLost`] when the lease expired, was taken over, or its local deadline passed,
    /// including when the store's confirmation arrived after the extended lease's own local
    /// deadline: the lost-lock signal then fires. Also `LockLost` once the execution has ended
    /// and released the lock (a context kept past it cannot revive the lock).
    /// [`Error::Store`] when the store failed (the lease is kept until its local deadline).
    pub async fn extend(
        &self,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<(), Error> {
        self.active
            .extend(lock_at_most_for, lock_at_least_for)
            .await
    }

    /// Completes when the task should stop: the lease can no longer be trusted (an extension
    /// was refused, or its local deadline passed without a confirmed renewal), or the scheduler
    /// is shutting down. Use it in `tokio::select!` around the work.
    pub async fn cancelled(&self) {
        self.active.cancelled().await
    }

    /// Whether the lease was lost (not merely a stop request).
    pub fn is_lost(&self) -> bool {
        self.active.check_deadline()
    }

    /// Whether [`cancelled`](Self::cancelled) has fired.
    pub fn is_cancelled(&self) -> bool {
        self.active.check_deadline() || self.active.is_cancelled()
    }
}
