//! A job's lock resolved once against the scheduler's configuration, and the one function that
//! starts a run under it: for a tick, a rerun, a catch-up, `Scheduler::run_now` and
//! `Job::run_once` alike.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::job::RunFn;
use super::run::{RunPlan, run_heartbeat, run_recorded};
use crate::lock::executor::{Claimed, ExecuteOptions, StartGate};
use crate::{
    Error, JobLock, LockConfiguration, LockContext, LockingTaskExecutor, OnInterrupted, RunRecord,
    SchedulerConfig, TaskResult, Tick,
};
use shedlock_core::__private::validate_keep_alive_interval;

/// A job's lock with the configuration's defaults filled in, checked once (at registration, or
/// by `Job::run_once` for the configuration it is given): what every run of the job uses as is.
#[derive(Debug, Clone)]
pub(crate) struct ResolvedLock {
    /// The lock, validated by [`LockConfiguration::new`]: name and durations.
    pub(crate) config: LockConfiguration,
    /// How often keep-alive extends the lease (`None`: no keep-alive).
    pub(crate) keep_alive: Option<Duration>,
    /// For scheduled ticks: a heartbeat lease (shorter than `lock_at_most_for`, renewed every
    /// third of it while the job runs); `None`: the lease is `lock_at_most_for`.
    pub(crate) heartbeat: Option<Duration>,
    /// The run heartbeat of a job whose interrupted ticks are rerun ([`run_heartbeat`]).
    pub(crate) alive_for: Option<Duration>,
    pub(crate) retries: u32,
    pub(crate) retry_backoff: Duration,
    pub(crate) on_interrupted: OnInterrupted,
}

impl ResolvedLock {
    /// `lock` of the job `job` against `config`'s defaults.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field (and the job) that is wrong.
    pub(crate) fn resolve(
        job: &str,
        lock: &JobLock,
        config: &SchedulerConfig,
    ) -> Result<Self, Error> {
        let at_most = lock
            .lock_at_most_for
            .unwrap_or(config.default_lock_at_most_for);
        let at_least = lock
            .lock_at_least_for
            .unwrap_or(config.default_lock_at_least_for.min(at_most));
        let resolved = LockConfiguration::new(lock.name.clone().into_owned(), at_most, at_least)?;
        let keep_alive = lock.keep_alive.unwrap_or(config.keep_alive).then(|| {
            config
                .keep_alive_interval
                .unwrap_or(resolved.lock_at_most_for() / 3)
        });
        if let Some(interval) = keep_alive {
            validate_keep_alive_interval(
                interval,
                resolved.lock_at_most_for(),
                &format!("lock_at_most_for of job `{job}`"),
            )?;
        }
        let run_lease = config.run_lease;
        // A heartbeat only where it shortens the lease; `keep_alive` jobs renew their own.
        let heartbeat = (keep_alive.is_none()
            && !run_lease.is_zero()
            && run_lease.max(resolved.lock_at_least_for()) < resolved.lock_at_most_for())
        .then(|| run_lease.max(resolved.lock_at_least_for()));
        let alive_for = run_heartbeat(lock.on_interrupted, run_lease, resolved.lock_at_most_for());
        Ok(ResolvedLock {
            config: resolved,
            keep_alive,
            heartbeat,
            alive_for,
            retries: lock.retries,
            retry_backoff: lock.retry_backoff,
            on_interrupted: lock.on_interrupted,
        })
    }

    /// The lock a run asks for, as `launch` says (its lease, its condition, its tick), with
    /// the keep-alive interval and the heartbeat's end that go with it.
    pub(crate) fn config_for(
        &self,
        launch: &Launch,
    ) -> (LockConfiguration, Option<Duration>, Option<Instant>) {
        let (lock, renew_until) = match self.heartbeat.filter(|_| launch.heartbeat) {
            Some(lease) => (
                self.config.clone().with_lease(lease),
                Some(Instant::now() + self.config.lock_at_most_for()),
            ),
            None => (self.config.clone(), None),
        };
        let lock = match launch.unless {
            Unless::Never => lock,
            Unless::AcquiredSince(since) => lock.unless_acquired_since(since),
            Unless::AcquiredWithin(window) => lock.unless_acquired_within(window),
        };
        let lock = match launch.claim {
            Some(tick) => lock.for_tick(tick),
            None => lock,
        };
        (lock, self.keep_alive_for(launch), renew_until)
    }

    /// How often a run as `launch` says renews its lease: the heartbeat's interval, or
    /// keep-alive's.
    fn keep_alive_for(&self, launch: &Launch) -> Option<Duration> {
        match self.heartbeat.filter(|_| launch.heartbeat) {
            Some(lease) => Some(lease / 3),
            None => self.keep_alive,
        }
    }

    /// The run of the job `job` (calling `run`) under this lock, as `launch` says: acquired
    /// (unless `launch` was claimed already), recorded in the store's run log (with retries,
    /// and the takeover of an interrupted run), released.
    pub(crate) fn run<S: Clone + Send + 'static>(
        &self,
        job: Arc<str>,
        run: Arc<RunFn<S>>,
        state: S,
        executor: LockingTaskExecutor,
        mut launch: Launch,
    ) -> impl Future<Output = Result<TaskResult<Result<(), String>>, Error>> + Send + 'static {
        let (ask, keep_alive, renew_until) = match launch.claimed.take() {
            Some((claimed, renew_until)) => (
                Ask::Answered(claimed),
                self.keep_alive_for(&launch),
                renew_until,
            ),
            None => {
                let (lock, keep_alive, renew_until) = self.config_for(&launch);
                (Ask::Now(lock), keep_alive, renew_until)
            }
        };
        let options = ExecuteOptions {
            keep_alive,
            renew_until,
            stop: launch.stop,
            on_start: launch.on_start,
            may_start: launch.may_start,
        };
        let plan = RunPlan {
            job,
            tick: launch.tick,
            retries: self.retries,
            backoff: self.retry_backoff,
            rerun: launch.rerun,
            alive_for: self.alive_for,
            cancel: launch.cancel,
        };
        let (skipped, name) = (launch.skipped, self.config.shared_name());
        async move {
            let start = |context| run_recorded(run, state, context, plan, skipped);
            match ask {
                Ask::Now(lock) => executor.execute_with(&lock, options, start).await,
                Ask::Answered(claimed) => {
                    executor
                        .execute_claimed(&name, claimed, options, start)
                        .await
                }
            }
        }
    }
}

/// A run's lock: to ask for now, or asked for already.
enum Ask {
    Now(LockConfiguration),
    Answered(Claimed),
}

/// What differs between one run and another of the same job: a tick, a rerun, a catch-up, or
/// a run by hand (the default: no tick, no condition, the whole lease).
#[derive(Default)]
pub(crate) struct Launch {
    /// The fire time the run belongs to (`None`: a run by hand).
    pub(crate) tick: Option<SystemTime>,
    /// When to refuse the lock although it is free.
    pub(crate) unless: Unless,
    /// The tick claimed in the store (granted once across the fleet), if any.
    pub(crate) claim: Option<Tick>,
    /// The lock, asked for already (with the other ticks due at the same instant), and the
    /// heartbeat's end that went with it.
    pub(crate) claimed: Option<(Claimed, Option<Instant>)>,
    /// The interrupted run this one takes over, if any: checked again under the lock.
    pub(crate) rerun: Option<Arc<RunRecord>>,
    /// Hold the lock with the [heartbeat lease](ResolvedLock::heartbeat), as ticks do.
    pub(crate) heartbeat: bool,
    /// Cancelled by the scheduler to ask the run to stop.
    pub(crate) stop: Option<CancellationToken>,
    /// Cancelled when the job is removed with `RemoveMode::Cancel`: the run is dropped.
    pub(crate) cancel: Option<CancellationToken>,
    /// Receives the run's lock context once the lock is taken.
    pub(crate) on_start: Option<Box<dyn FnOnce(LockContext) + Send>>,
    /// Asked right before the run starts, after the lock is taken.
    pub(crate) may_start: Option<StartGate>,
    /// Set by a rerun that finds nothing left to do (`None`: nobody asks).
    pub(crate) skipped: Option<Arc<AtomicBool>>,
}

/// When a run refuses the lock even though it is free: if anyone acquired it since an instant
/// (a tick: since it was due, less the allowance), or within a window (a catch-up).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) enum Unless {
    #[default]
    Never,
    AcquiredSince(Instant),
    AcquiredWithin(Duration),
}
