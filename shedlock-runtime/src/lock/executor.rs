//! Running futures under a lock.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::lock::context::{self, ActiveLock};
use crate::lock::handle::{LockService, trusted_until};
use crate::{
    Error, Lock, LockConfiguration, LockContext, LockEvent, LockLease, LockListener, LockProvider,
};
use shedlock_core::__private::validate_keep_alive_interval;

/// The outcome of a locked execution. "Skipped" is a normal outcome, not an error.
#[must_use]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskResult<T> {
    /// The lock was acquired and the task ran to completion with this value.
    Executed(T),
    /// The lock was held elsewhere; the task did not run.
    Skipped,
}

impl<T> TaskResult<T> {
    /// Whether the task ran.
    pub fn was_executed(&self) -> bool {
        matches!(self, TaskResult::Executed(_))
    }

    /// The task's value, if it ran.
    pub fn into_executed(self) -> Option<T> {
        match self {
            TaskResult::Executed(value) => Some(value),
            TaskResult::Skipped => None,
        }
    }
}

/// Runs futures under a lock from a [`LockProvider`]: acquire, run, release.
///
/// - The lock is released after success, after an error value, after a panic (which then
///   resumes), and when the future is dropped before completion (in the background).
/// - Re-entrant: inside a locked execution, a nested execution of the same lock name **from
///   the same store** runs without acquiring again, as long as the enclosing lease is still
///   trusted; once that lease is lost (an extension refused, its local deadline passed) the
///   nested execution does not run and returns [`Error::LockLost`]. Another name, or the same
///   name from another store, takes its own lock (acquire, run, release; `Skipped` when held).
/// - "The same store" means the same provider instance: clones of one executor, executors built
///   with [`from_shared`](Self::from_shared) from one `Arc<dyn LockProvider>`, and their
///   [`with_listener`](Self::with_listener) variants. Two executors each built with
///   [`new`](Self::new) are different stores even over one database (they may act as different
///   holders): there a nested execution of a held name is `Skipped`.
/// - Code inside reaches the lock through [`LockContext::current`].
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{InMemoryLockProvider, LockConfiguration};
/// use shedlock_runtime::{LockingTaskExecutor, TaskResult};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), shedlock_core::Error> {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
/// let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO)?;
///
/// let outcome = executor.execute(&config, async { 40 + 2 }).await?;
/// assert_eq!(outcome, TaskResult::Executed(42));
///
/// // While one execution holds the lock, another is skipped.
/// let held = executor.try_lock(&config).await?.expect("free");
/// assert_eq!(executor.execute(&config, async { 0 }).await?, TaskResult::Skipped);
/// held.release().await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct LockingTaskExecutor {
    service: Arc<LockService>,
}

/// How the scheduler runs a locked job; plain `execute` uses the default.
#[derive(Default)]
pub(crate) struct ExecuteOptions {
    /// Extend the lease every this often while the task runs.
    pub(crate) keep_alive: Option<Duration>,
    /// Heartbeat mode: keep-alive renews the (short) lease only up to this instant, never
    /// past it (the job's `lock_at_most_for` after the request); `None`: without end.
    pub(crate) renew_until: Option<Instant>,
    /// Cancelled by the scheduler to ask the task to stop.
    pub(crate) stop: Option<CancellationToken>,
    /// Receives the running task's context, so the scheduler can signal it.
    pub(crate) on_start: Option<Box<dyn FnOnce(LockContext) + Send>>,
    /// Asked right before the task starts, after the lock is taken (shutdown, leadership): an
    /// error means the task must not start; the lock is given back and the error returned.
    pub(crate) may_start: Option<StartGate>,
}

/// Whether a task may start at this moment; see [`ExecuteOptions::may_start`].
pub(crate) type StartGate = Box<dyn Fn() -> Result<(), Error> + Send + Sync>;

/// An acquisition's answer: the lease and when it was requested, `None` when refused.
pub(crate) type Claimed = Result<Option<(LockLease, Instant)>, Error>;

impl std::fmt::Debug for ExecuteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecuteOptions")
            .field("keep_alive", &self.keep_alive)
            .field("renew_until", &self.renew_until)
            .field("stop", &self.stop)
            .field("may_start", &self.may_start.is_some())
            .finish_non_exhaustive()
    }
}

impl LockingTaskExecutor {
    /// An executor over `provider`.
    pub fn new(provider: impl LockProvider) -> Self {
        Self::from_shared(Arc::new(provider))
    }

    /// An executor over a shared provider.
    pub fn from_shared(provider: Arc<dyn LockProvider>) -> Self {
        LockingTaskExecutor {
            service: Arc::new(LockService {
                provider,
                listeners: Vec::new(),
            }),
        }
    }

    /// Adds a listener that sees every [`LockEvent`](crate::LockEvent) of this executor.
    pub fn with_listener(self, listener: impl LockListener) -> Self {
        self.with_shared_listener(Arc::new(listener))
    }

    pub(crate) fn with_shared_listener(self, listener: Arc<dyn LockListener>) -> Self {
        let mut listeners = self.service.listeners.clone();
        listeners.push(listener);
        LockingTaskExecutor {
            service: Arc::new(LockService {
                provider: Arc::clone(&self.service.provider),
                listeners,
            }),
        }
    }

    /// The provider locks come from.
    pub fn provider(&self) -> &Arc<dyn LockProvider> {
        &self.service.provider
    }

    /// Tries once to take the lock. `Ok(None)` when it is held elsewhere, and when the store's
    /// answer arrived after the lease's local deadline (`lock_at_most_for` after the request
    /// was sent): such a lease is reported as [`LockEvent::Lost`](crate::LockEvent::Lost) and
    /// released, never used.
    ///
    /// # Errors
    /// [`Error::Store`] when the store failed.
    pub async fn try_lock(&self, config: &LockConfiguration) -> Result<Option<Lock>, Error> {
        let acquired = self.acquire(config).await?;
        Ok(acquired
            .map(|(lease, requested_at)| Lock::new(Arc::clone(&self.service), lease, requested_at)))
    }

    /// One acquisition attempt, reported as an event; the lease and when it was requested.
    async fn acquire(&self, config: &LockConfiguration) -> Claimed {
        self.service.emit(LockEvent::Attempt {
            lock_name: config.name(),
        });
        let requested_at = Instant::now();
        let answer = self.service.provider.acquire(config).await;
        self.answered(config, requested_at, answer).await
    }

    /// One acquisition attempt, reported as events: for a run started once the answer is in
    /// (by [`execute_with`](Self::execute_with), or by the scheduler for a tick alone at its
    /// instant).
    pub(crate) async fn claim(&self, config: &LockConfiguration) -> Claimed {
        self.acquire(config).await
    }

    /// Gives back a lease granted, at a request sent at `requested_at`, for a run that does
    /// not start: released at once, since nothing ran that `lock_at_least_for` would protect
    /// (a store error is retried in the background, as for every release).
    pub(crate) async fn give_back(&self, lease: &LockLease, requested_at: Instant) {
        let until = trusted_until(requested_at, lease.lock_at_most_for());
        let unused = lease.extended(lease.lock_until(), lease.lock_at_most_for(), Duration::ZERO);
        // Reported through events and logs inside.
        let _ = crate::lock::handle::release_lease(&self.service, &unused, until).await;
    }

    /// One attempt at each lock of `configs`, in one call to the provider (one round trip
    /// where the store batches), reported as events: the answers in order.
    pub(crate) async fn claim_many(&self, configs: &[LockConfiguration]) -> Vec<Claimed> {
        for config in configs {
            self.service.emit(LockEvent::Attempt {
                lock_name: config.name(),
            });
        }
        let requested_at = Instant::now();
        let answers = self.service.provider.acquire_many(configs).await;
        let mut claimed = Vec::with_capacity(configs.len());
        let mut answers = answers.into_iter();
        for config in configs {
            let answer = answers.next().unwrap_or_else(|| {
                Err(Error::Scheduler(format!(
                    "the lock store answered fewer locks than asked; `{}` had no answer",
                    config.name()
                )))
            });
            claimed.push(self.answered(config, requested_at, answer).await);
        }
        claimed
    }

    /// What the store answered for `config`, asked at `requested_at`, reported as an event.
    async fn answered(
        &self,
        config: &LockConfiguration,
        requested_at: Instant,
        answer: Result<Option<LockLease>, Error>,
    ) -> Claimed {
        match answer {
            Ok(Some(lease))
                if Instant::now() >= trusted_until(requested_at, lease.lock_at_most_for()) =>
            {
                // Granted, but the answer came after the lease's local deadline (a pause, a slow
                // network): another instance may hold it by now. Never hand it to the task; give
                // it back in case it is still ours.
                self.service.emit(LockEvent::Lost(&lease));
                // Its deadline has passed: one attempt, no retries.
                let until = trusted_until(requested_at, lease.lock_at_most_for());
                let _ = crate::lock::handle::release_lease(&self.service, &lease, until).await;
                Ok(None)
            }
            Ok(Some(lease)) => {
                self.service.emit(LockEvent::Acquired(&lease));
                Ok(Some((lease, requested_at)))
            }
            Ok(None) => {
                self.service.emit(LockEvent::Skipped {
                    lock_name: config.name(),
                });
                Ok(None)
            }
            Err(error) => {
                self.service.emit(LockEvent::AcquireFailed {
                    lock_name: config.name(),
                    error: &error,
                });
                Err(error)
            }
        }
    }

    /// Runs `task` if the lock can be taken now, then releases it.
    ///
    /// # Errors
    /// [`Error::Store`] when acquisition failed: the task did not run. A failed release is
    /// reported as an event and a warning, not as an error, since the task did run.
    ///
    /// # Panics
    /// Resumes the task's panic after releasing the lock.
    pub async fn execute<F: Future>(
        &self,
        config: &LockConfiguration,
        task: F,
    ) -> Result<TaskResult<F::Output>, Error> {
        self.execute_with(config, ExecuteOptions::default(), |_| task)
            .await
    }

    /// Like [`execute`](Self::execute), extending the lease every `interval` while `task` runs
    /// (by the configuration's `lock_at_most_for`), so the task may outlast its lease. If an
    /// extension is refused, or none succeeds before the lease's local deadline, the task's
    /// [`LockContext::cancelled`] fires.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`keep_alive_interval`) unless
    /// `0 < interval <= lock_at_most_for / 2`; otherwise as [`execute`](Self::execute).
    pub async fn execute_with_keep_alive<F: Future>(
        &self,
        config: &LockConfiguration,
        interval: Duration,
        task: F,
    ) -> Result<TaskResult<F::Output>, Error> {
        validate_keep_alive_interval(interval, config.lock_at_most_for(), "lock_at_most_for")?;
        let options = ExecuteOptions {
            keep_alive: Some(interval),
            ..ExecuteOptions::default()
        };
        self.execute_with(config, options, |_| task).await
    }

    /// Runs the task `start` returns under the lock, as [`execute`](Self::execute) with
    /// `options`; `start` is handed the context of the lock the task holds (the enclosing one
    /// for a re-entrant execution), so code that writes through the lease gets it from here.
    pub(crate) async fn execute_with<F: Future>(
        &self,
        config: &LockConfiguration,
        options: ExecuteOptions,
        start: impl FnOnce(LockContext) -> F,
    ) -> Result<TaskResult<F::Output>, Error> {
        if let Some(held) = context::enclosing(&self.service, config.name()) {
            if !held.is_trusted() {
                return Err(held.lost_error());
            }
            if let Some(may_start) = &options.may_start {
                may_start()?;
            }
            return Ok(TaskResult::Executed(start(LockContext::new(held)).await));
        }
        let claimed = self.claim(config).await;
        self.execute_claimed(config.name(), claimed, options, start)
            .await
    }

    /// The rest of [`execute_with`](Self::execute_with), once the lock `name` was asked for:
    /// runs the task under the lease `claimed` holds, if any, then releases it.
    pub(crate) async fn execute_claimed<F: Future>(
        &self,
        name: &str,
        claimed: Claimed,
        options: ExecuteOptions,
        start: impl FnOnce(LockContext) -> F,
    ) -> Result<TaskResult<F::Output>, Error> {
        let Some((lease, requested_at)) = claimed? else {
            return Ok(TaskResult::Skipped);
        };
        if let Some(refused) = options
            .may_start
            .as_ref()
            .and_then(|may_start| may_start().err())
        {
            self.give_back(&lease, requested_at).await;
            return Err(refused);
        }
        let service = Arc::clone(&self.service);
        let active = Arc::new(ActiveLock::new(service, lease, requested_at, options.stop));
        if let Some(on_start) = options.on_start {
            on_start(LockContext::new(Arc::clone(&active)));
        }
        let guard = ReleaseOnDrop(Some(Arc::clone(&active)));

        let task = start(LockContext::new(Arc::clone(&active)));
        let task = context::scope(Arc::clone(&active), AssertUnwindSafe(task).catch_unwind());
        let outcome = match options.keep_alive {
            None => task.await,
            Some(interval) => {
                // Keep-alive finishes an extension in flight before the release below: an
                // extension the store applied after the release would hold the lock again.
                let done = CancellationToken::new();
                let task = async {
                    let outcome = task.await;
                    done.cancel();
                    outcome
                };
                let renew_until = options.renew_until;
                tokio::join!(task, keep_alive(&active, interval, renew_until, &done)).0
            }
        };

        guard.disarm();
        if active.check_deadline() {
            tracing::warn!(
                lock = name,
                "task ran past its lease (lock_at_most_for) without a confirmed extension"
            );
        }
        // Reported through events and logs; the task's own outcome matters more.
        let _ = active.release().await;
        match outcome {
            Ok(value) => Ok(TaskResult::Executed(value)),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// Extends the lease every `interval` (at most half the current lease) while the task runs,
/// until `done`, which it notices between extensions, never during one. A failed extension is
/// retried after another interval; a refused one, or the local deadline passing, marks the
/// lease lost (the task is signalled) and ends keep-alive. A stop request does not: the task
/// still runs, and still holds the lock, until it stops.
///
/// With `renew_until` (a heartbeat lease), each extension is the lease's first length but ends
/// no later than `renew_until`; once that is reached, extensions stop and the lease runs out
/// there, as a plain lease of `lock_at_most_for` would.
async fn keep_alive(
    active: &ActiveLock,
    interval: Duration,
    renew_until: Option<Instant>,
    done: &CancellationToken,
) {
    let length = active.lease().lock_at_most_for();
    let mut last_attempt = None;
    loop {
        let renewed = active.renewed();
        tokio::pin!(renewed);
        renewed.as_mut().enable();
        // Never past the local deadline: the extension attempt then marks the lease lost.
        let next = active
            .next_extension(interval, last_attempt)
            .min(active.local_deadline());
        tokio::select! {
            biased;
            () = done.cancelled() => return,
            // Extended by the task itself: count from that extension.
            () = &mut renewed => continue,
            () = tokio::time::sleep_until(next) => {}
        }
        last_attempt = Some(Instant::now());
        let lease = active.lease();
        let extension = match renew_until {
            None => lease.lock_at_most_for(),
            Some(cap) => {
                let left = cap.saturating_duration_since(Instant::now());
                // Not worth a statement: the lease nearly reaches the cap already.
                if left <= interval {
                    return;
                }
                length.min(left)
            }
        };
        let extended = active
            .extend(extension, lease.lock_at_least_for().min(extension))
            .await;
        if matches!(extended, Err(Error::LockLost { .. })) {
            return;
        }
    }
}

/// Releases in the background when a locked task is dropped before it completes.
struct ReleaseOnDrop(Option<Arc<ActiveLock>>);

impl ReleaseOnDrop {
    fn disarm(mut self) {
        self.0 = None;
    }
}

impl Drop for ReleaseOnDrop {
    fn drop(&mut self) {
        let Some(active) = self.0.take() else { return };
        active.request_stop();
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    // The outcome is reported through events and logs inside.
                    let _ = active.release().await;
                });
            }
            Err(_) => tracing::warn!(
                lock = active.lease().name(),
                "locked task dropped outside a tokio runtime; its lock expires at lock_until"
            ),
        }
    }
}
