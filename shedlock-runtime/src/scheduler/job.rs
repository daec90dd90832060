//! A job: what runs, when, and under which lock.

use std::borrow::Cow;
use std::fmt::{self, Display};
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use super::plan::{Launch, ResolvedLock, Unless};
use crate::{Error, LockingTaskExecutor, OnInterrupted, Schedule, SchedulerConfig, TaskResult};
use shedlock_core::__private::{validate_durations, validate_lock_name};

/// Wait between a failed attempt and its retry unless [`JobLock::retries`] sets one.
const DEFAULT_RETRY_BACKOFF: Duration = Duration::from_secs(10);

pub(crate) type RunFn<S> =
    dyn Fn(S) -> Pin<Box<dyn Future<Output = Result<(), String>> + Send>> + Send + Sync;

/// A scheduled job over application state `S`.
///
/// The `#[scheduled]` macro builds these for annotated functions (`shedlock::job!(my_fn)`);
/// they can also be built by hand:
///
/// ```
/// use std::time::Duration;
/// use shedlock_runtime::{Job, JobLock, Schedule};
///
/// let job: Job<()> = Job::new("purge", Schedule::fixed_rate(Duration::from_secs(60))?, |()| async {
///     Ok::<(), std::io::Error>(())
/// })
/// .with_lock(JobLock::new("purge")?.lock_at_most_for(Duration::from_secs(300))?);
/// assert_eq!(job.name(), "purge");
/// # Ok::<(), shedlock_core::Error>(())
/// ```
pub struct Job<S> {
    pub(crate) name: Cow<'static, str>,
    pub(crate) schedule: Schedule,
    pub(crate) lock: Option<JobLock>,
    pub(crate) leader: Option<Cow<'static, str>>,
    pub(crate) run: Arc<RunFn<S>>,
}

impl<S> Job<S> {
    /// A job named `name` (used in logs and status) running `run` on `schedule`, on every
    /// instance until [`with_lock`](Self::with_lock) puts it under a lock.
    ///
    /// Inside `run`, [`LockContext::current`](crate::LockContext::current) reaches the job's lock.
    pub fn new<F, Fut>(name: impl Into<Cow<'static, str>>, schedule: Schedule, run: F) -> Self
    where
        F: Fn(S) -> Fut + Send + Sync + 'static,
        Fut: Future<Output: IntoJobResult> + Send + 'static,
    {
        Job {
            name: name.into(),
            schedule,
            lock: None,
            leader: None,
            run: Arc::new(move |state| {
                let run = run(state);
                Box::pin(async move { run.await.into_job_result() })
            }),
        }
    }

    /// The same job on another schedule: e.g. a `#[scheduled]` job moved to a time read from
    /// configuration, or handed to [`JobControl::replace`](crate::JobControl::replace).
    pub fn with_schedule(mut self, schedule: Schedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// Runs the job under `lock`: on one instance at a time.
    pub fn with_lock(mut self, lock: JobLock) -> Self {
        self.lock = Some(lock);
        self
    }

    /// Runs the job only while this instance leads the election `election` (no per-run lock):
    /// the scheduler campaigns in that election on its provider.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`leader`) for an invalid election name.
    pub fn leader_only(mut self, election: impl Into<Cow<'static, str>>) -> Result<Self, Error> {
        let election = election.into();
        validate_lock_name("leader", &election)?;
        self.leader = Some(election);
        Ok(self)
    }

    /// The election the job follows, if it is leader-only.
    pub fn leader(&self) -> Option<&str> {
        self.leader.as_deref()
    }

    /// The job's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// When the job fires.
    pub fn schedule(&self) -> &Schedule {
        &self.schedule
    }

    /// The job's lock, if it runs under one.
    pub fn lock(&self) -> Option<&JobLock> {
        self.lock.as_ref()
    }

    /// Checks the job's lock against `config`, as [`Scheduler`](crate::Scheduler) does at start:
    /// its durations with the configured defaults filled in, and its keep-alive interval. Useful
    /// before handing the job to another runner.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field (and the job) that is wrong.
    pub fn validate(&self, config: &SchedulerConfig) -> Result<(), Error> {
        self.resolve_lock(config).map(drop)
    }

    /// The job's lock with `config`'s defaults filled in, checked: what its runs use as is.
    /// `None` for a job without a lock.
    pub(crate) fn resolve_lock(
        &self,
        config: &SchedulerConfig,
    ) -> Result<Option<ResolvedLock>, Error> {
        self.lock
            .as_ref()
            .map(|lock| ResolvedLock::resolve(&self.name, lock, config))
            .transpose()
    }

    /// The job's run, calling its closure only when first polled: a closure may work before
    /// it returns its future, and that work belongs under the lock, after every check.
    pub(crate) fn start_lazily(
        &self,
        state: S,
    ) -> impl Future<Output = Result<(), String>> + use<S> {
        start_lazily(&self.run, state)
    }
}

/// A run of `run`, calling the closure only when first polled: a closure may work before it
/// returns its future, and that work belongs under the lock, after every check.
pub(crate) fn start_lazily<S>(
    run: &Arc<RunFn<S>>,
    state: S,
) -> impl Future<Output = Result<(), String>> + use<S> {
    let run = Arc::clone(run);
    async move { run(state).await }
}

impl<S: Clone + Send + 'static> Job<S> {
    /// Runs the job once, now, under its lock if it has one (durations not set on the lock come
    /// from `config`), extending the lease while it runs when keep-alive is on for it.
    /// `Skipped` when another instance holds the lock; the inner `Err` is the job's own error
    /// text.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when the lock's durations are invalid against `config`;
    /// [`Error::Store`] when the lock could not be acquired.
    ///
    /// # Panics
    /// Resumes the job's panic after releasing its lock.
    pub async fn run_once(
        &self,
        executor: &LockingTaskExecutor,
        config: &SchedulerConfig,
        state: S,
    ) -> Result<TaskResult<Result<(), String>>, Error> {
        self.run_by_hand(executor, config, state, Launch::default())
            .await
    }

    /// Runs the job for its schedule's latest tick, for a runner other than shedlock's own
    /// `Scheduler` (tokio-cron-scheduler, a loop of your own) to call when a tick fires: as
    /// [`run_once`](Self::run_once), but for a cron schedule the tick is claimed in the store
    /// ([`Schedule::latest_tick`]: granted once across instances, whatever their clocks) and
    /// the lock is refused (`Skipped`) when any instance acquired it since that tick's fire time
    /// (less the allowance of [`Schedule::latest_tick_since`]), so a tick fired late on one
    /// instance does not run again where another already ran it, whatever `lock_at_least_for`
    /// is.
    ///
    /// # Errors
    /// As [`run_once`](Self::run_once).
    ///
    /// # Panics
    /// Resumes the job's panic after releasing its lock.
    pub async fn run_latest_tick(
        &self,
        executor: &LockingTaskExecutor,
        config: &SchedulerConfig,
        state: S,
    ) -> Result<TaskResult<Result<(), String>>, Error> {
        let zone = config.zone()?;
        let since = self.schedule.latest_tick_since(zone);
        let tick = self
            .schedule
            .latest_fire(chrono::Utc::now(), zone)
            .map(Into::into);
        let unless = since.map_or(Unless::Never, Unless::AcquiredSince);
        let launch = Launch {
            tick,
            unless,
            claim: self.schedule.latest_tick(zone),
            ..Launch::default()
        };
        self.run_by_hand(executor, config, state, launch).await
    }

    /// Runs the job under its lock resolved against `config` (recorded in the store's run log,
    /// with its retries), or plainly for a job without one.
    async fn run_by_hand(
        &self,
        executor: &LockingTaskExecutor,
        config: &SchedulerConfig,
        state: S,
        launch: Launch,
    ) -> Result<TaskResult<Result<(), String>>, Error> {
        match self.resolve_lock(config)? {
            Some(lock) => {
                let (name, run) = (Arc::from(&*self.name), Arc::clone(&self.run));
                lock.run(name, run, state, executor.clone(), launch).await
            }
            None => Ok(TaskResult::Executed(self.start_lazily(state).await)),
        }
    }
}

impl<S> Clone for Job<S> {
    fn clone(&self) -> Self {
        Job {
            name: self.name.clone(),
            schedule: self.schedule.clone(),
            lock: self.lock.clone(),
            leader: self.leader.clone(),
            run: Arc::clone(&self.run),
        }
    }
}

impl<S> fmt::Debug for Job<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Job")
            .field("name", &self.name)
            .field("schedule", &self.schedule)
            .field("lock", &self.lock)
            .field("leader", &self.leader)
            .finish_non_exhaustive()
    }
}

/// The lock a job runs under. Durations left unset come from the scheduler's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobLock {
    pub(crate) name: Cow<'static, str>,
    pub(crate) lock_at_most_for: Option<Duration>,
    pub(crate) lock_at_least_for: Option<Duration>,
    pub(crate) keep_alive: Option<bool>,
    pub(crate) retries: u32,
    pub(crate) retry_backoff: Duration,
    pub(crate) on_interrupted: OnInterrupted,
}

impl JobLock {
    /// A lock named `name` with the configured default durations.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`name`) for an empty, too long or control-character name.
    pub fn new(name: impl Into<Cow<'static, str>>) -> Result<Self, Error> {
        let name = name.into();
        validate_lock_name("name", &name)?;
        Ok(JobLock::default_for(name))
    }

    /// A lock with every setting at its default; the name is not checked.
    pub(crate) fn default_for(name: Cow<'static, str>) -> Self {
        JobLock {
            name,
            lock_at_most_for: None,
            lock_at_least_for: None,
            keep_alive: None,
            retries: 0,
            retry_backoff: DEFAULT_RETRY_BACKOFF,
            on_interrupted: OnInterrupted::Skip,
        }
    }

    /// Runs a run that returns an error again (a panic is not retried), up to `retries` more
    /// times, `backoff` after each failure, still under the same lock (the
    /// lease is renewed meanwhile when the scheduler's `run_lease` is on). Each attempt is
    /// recorded; the last error is the run's. Retries stop when the run is asked to stop
    /// (shutdown) or loses its lease. Default: no retries.
    pub fn retries(mut self, retries: u32, backoff: Duration) -> Self {
        self.retries = retries;
        self.retry_backoff = backoff;
        self
    }

    /// What happens to a tick whose run was interrupted (its instance died): skipped (the
    /// default), or run again once on a surviving instance ([`OnInterrupted`]).
    pub fn on_interrupted(mut self, policy: OnInterrupted) -> Self {
        self.on_interrupted = policy;
        self
    }

    /// Sets the lease length (instead of the configured default).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when zero or shorter than a `lock_at_least_for` already set.
    pub fn lock_at_most_for(mut self, lock_at_most_for: Duration) -> Result<Self, Error> {
        validate_durations(lock_at_most_for, self.lock_at_least_for.unwrap_or_default())?;
        self.lock_at_most_for = Some(lock_at_most_for);
        Ok(self)
    }

    /// Sets the minimum hold time (instead of the configured default).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] when longer than a `lock_at_most_for` already set.
    pub fn lock_at_least_for(mut self, lock_at_least_for: Duration) -> Result<Self, Error> {
        if let Some(at_most) = self.lock_at_most_for {
            validate_durations(at_most, lock_at_least_for)?;
        }
        self.lock_at_least_for = Some(lock_at_least_for);
        Ok(self)
    }

    /// Extends the lease while the job runs (instead of the configured default).
    pub fn keep_alive(mut self, keep_alive: bool) -> Self {
        self.keep_alive = Some(keep_alive);
        self
    }

    /// The lock's name.
    pub fn name(&self) -> &str {
        &self.name
    }
}

/// What a job may return: `()` or any `Result<T, E: Display>`. Errors are logged by the scheduler
/// with the job's name.
#[diagnostic::on_unimplemented(
    message = "a job cannot return `{Self}`",
    label = "return `()` or `Result<T, E>` where `E: Display`",
    note = "the scheduler logs a job's error with its display text"
)]
pub trait IntoJobResult {
    /// `Err` carries the error's display text.
    fn into_job_result(self) -> Result<(), String>;
}

impl IntoJobResult for () {
    fn into_job_result(self) -> Result<(), String> {
        Ok(())
    }
}

impl<T, E: Display> IntoJobResult for Result<T, E> {
    fn into_job_result(self) -> Result<(), String> {
        self.map(drop).map_err(|e| e.to_string())
    }
}
