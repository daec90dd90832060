//! The scheduler: runs registered jobs on their schedules, each locked job on one instance at
//! a time, and shuts down gracefully.
//!
//! Why our own runner rather than tokio-cron-scheduler's: its runner spawns a new task per tick
//! even while the previous run goes on (its #83), freezes a zone's UTC offset when a job is
//! created (an hour off after a DST change, #87/#107), can stop firing fixed-interval jobs that
//! fall behind (#56/#113), reports a panic as an opaque `RecvError` (#57), and its `shutdown()`
//! neither awaits nor cancels running jobs. We keep its cron dialect exactly (croner with the
//! same parser settings as its `Job::new_async`) and run all jobs on one timer of our own
//! (`runner`), with a task only for each tick in flight.

mod builder;
pub(crate) mod config;
mod control;
mod fleet;
pub(crate) mod job;
mod plan;
mod recovery;
pub(crate) mod registry;
mod roster;
mod run;
mod runner;
mod runtime;
pub(crate) mod schedule;
mod status;
mod tick;
mod timing;

use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use tokio::task::JoinSet;

pub use builder::SchedulerBuilder;
pub use control::{JobControl, RemoveMode};
pub use run::{OnInterrupted, RunContext};
pub use status::{JobOutcome, JobStatus, ShutdownReport};

use crate::lock::executor::StartGate;
use crate::{Error, LeaderElection, LockingTaskExecutor, SchedulerConfig, TaskResult};
use plan::Launch;
use roster::{AnyRoster, Roster};
use runtime::{PreparedJob, Runtime, shutdown_gate};

/// A running scheduler. Build one with [`Scheduler::builder`].
///
/// Dropping it stops new ticks; call [`shutdown`](Self::shutdown) to also wait for running
/// jobs and release their locks. Jobs are added, replaced and removed while it runs through
/// [`job_control`](Self::job_control).
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::InMemoryLockProvider;
/// use shedlock_runtime::{Job, JobLock, JobRegistry, Schedule, Scheduler, SchedulerConfig};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), shedlock_core::Error> {
/// let job = Job::new("tick", Schedule::fixed_rate(Duration::from_millis(10))?, |()| async {})
///     .with_lock(JobLock::new("tick")?);
/// let scheduler = Scheduler::builder()
///     .provider(InMemoryLockProvider::new())
///     .config(SchedulerConfig::default())
///     .registry(JobRegistry::new(()).add(job))
///     .start()
///     .await?;
/// let report = scheduler.shutdown().await;
/// assert_eq!(report.aborted, 0);
/// # Ok(())
/// # }
/// ```
pub struct Scheduler {
    runtime: Arc<Runtime>,
    elections: Vec<Arc<LeaderElection>>,
    config: SchedulerConfig,
    /// The jobs, of the registry's state type.
    roster: Arc<dyn AnyRoster>,
    loops: Mutex<Option<JoinSet<()>>>,
}

type RunNowFuture =
    std::pin::Pin<Box<dyn Future<Output = Result<TaskResult<Result<(), String>>, Error>> + Send>>;

impl Scheduler {
    /// A builder: add a provider (unless every job is unlocked), a configuration and a registry.
    pub fn builder() -> SchedulerBuilder<()> {
        SchedulerBuilder::new()
    }

    /// The status of every job: next fire time, last outcome, counts. In registration order;
    /// a job added at runtime takes the place of one removed before, if any, else comes last.
    pub fn status(&self) -> Vec<JobStatus> {
        self.roster.status()
    }

    /// Adds, replaces and removes jobs while the scheduler runs: the handle for jobs over the
    /// registry's state `S` (`()` for a scheduler started without a registry). See
    /// [`JobControl`].
    ///
    /// # Errors
    /// [`Error::Scheduler`] naming both types when the registry's state is not `S`.
    pub fn job_control<S: Clone + Send + Sync + 'static>(&self) -> Result<JobControl<S>, Error> {
        let state_type = self.roster.state_type();
        match Arc::clone(&self.roster).as_any().downcast::<Roster<S>>() {
            Ok(roster) => Ok(JobControl { roster }),
            Err(_) => Err(Error::Scheduler(format!(
                "the scheduler's jobs take state `{state_type}`, not `{}`",
                std::any::type_name::<S>()
            ))),
        }
    }

    /// The election a leader-only job follows (by its name, as in `leader = "…"`), to ask
    /// whether this instance leads it or to watch its changes.
    pub fn election(&self, name: &str) -> Option<&LeaderElection> {
        self.elections
            .iter()
            .find(|election| election.name() == name)
            .map(|election| &**election)
    }

    /// The executor locked jobs run through, if the scheduler has a provider.
    pub fn executor(&self) -> Option<&LockingTaskExecutor> {
        self.runtime.executor.as_ref()
    }

    /// The configuration the scheduler runs with.
    pub fn config(&self) -> &SchedulerConfig {
        &self.config
    }

    /// Runs a job once now, under its lock (`Skipped` when another instance holds it),
    /// independent of its schedule. Once [`shutdown`](Self::shutdown) has begun, nothing starts:
    /// checked before the lock is taken and again right before the job starts.
    ///
    /// # Errors
    /// [`Error::Scheduler`] for an unknown job name, and when shutdown has begun (the job did
    /// not run); [`Error::Store`] when the lock could not be acquired.
    pub async fn run_now(&self, job_name: &str) -> Result<TaskResult<Result<(), String>>, Error> {
        match self.roster.run_now(job_name) {
            Some(run) => run.await,
            None => Err(Error::Scheduler(format!("no job named `{job_name}`"))),
        }
    }

    /// Stops firing new ticks (a tick due at that moment does not start, nor does
    /// [`run_now`](Self::run_now)), waits up to `shutdown_grace_period` for running jobs, then
    /// signals them to stop (their lock context's `cancelled()` fires), waits up to
    /// `shutdown_cancel_period`, and finally aborts what is left. Every held lock is released
    /// (honouring `lock_at_least_for`) before this returns.
    ///
    /// A second call returns an empty report.
    pub async fn shutdown(&self) -> ShutdownReport {
        let Some(mut loops) = self.loops.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return ShutdownReport::default();
        };
        let runtime = &self.runtime;
        runtime.shutdown.cancel();
        tracing::info!("scheduler shutting down: no new ticks");
        let phases = [
            (
                self.config.shutdown_grace_period,
                &runtime.stop,
                "asking running jobs to stop",
            ),
            (
                self.config.shutdown_cancel_period,
                &runtime.abort,
                "aborting jobs that did not stop",
            ),
        ];
        for (wait, next_phase, message) in phases {
            let all_done = tokio::time::timeout(wait, async {
                while loops.join_next().await.is_some() {}
                runtime.tasks.close();
                runtime.tasks.wait().await;
            })
            .await
            .is_ok();
            if all_done {
                break;
            }
            tracing::warn!("{message}");
            next_phase.cancel();
        }
        while loops.join_next().await.is_some() {}
        runtime.tasks.close();
        runtime.tasks.wait().await;
        for election in &self.elections {
            election.resign().await;
        }
        let counters = &runtime.counters;
        let report = ShutdownReport {
            finished: counters.finished.load(Ordering::Relaxed),
            cancelled: counters.cancelled.load(Ordering::Relaxed),
            aborted: counters.aborted.load(Ordering::Relaxed),
            locks_released: counters.locks_released.load(Ordering::Relaxed),
        };
        tracing::info!(?report, "scheduler stopped");
        report
    }

    /// Waits for ctrl-c (or SIGTERM on Unix), then shuts down gracefully.
    pub async fn shutdown_on_signal(&self) -> ShutdownReport {
        wait_for_signal().await;
        self.shutdown().await
    }
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; waiting for ctrl-c only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.runtime.shutdown.cancel();
    }
}

impl fmt::Debug for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Scheduler")
            .field("jobs", &self.roster.status())
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// `Scheduler::run_now` for `prepared`: a run by hand under its lock.
async fn run_now<S: Clone + Send + Sync + 'static>(
    prepared: Arc<PreparedJob<S>>,
    runtime: Arc<Runtime>,
    state: S,
) -> Result<TaskResult<Result<(), String>>, Error> {
    let may_start: StartGate = Box::new(shutdown_gate(&runtime, &prepared.name));
    may_start()?;
    match (&prepared.lock, &runtime.executor) {
        (Some(lock), Some(executor)) => {
            let launch = Launch {
                may_start: Some(may_start),
                ..Launch::default()
            };
            let (name, run) = (Arc::clone(&prepared.name), Arc::clone(&prepared.run));
            lock.run(name, run, state, executor.clone(), launch).await
        }
        _ => Ok(TaskResult::Executed(prepared.start_lazily(state).await)),
    }
}
