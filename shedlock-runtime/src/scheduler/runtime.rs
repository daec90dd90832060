//! What the job runners of one scheduler share, and what passes between waiting for a tick
//! (`runner`) and running it (`tick`).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, SystemTime};

use chrono_tz::Tz;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::plan::ResolvedLock;
use super::recovery::Watch;
use super::status::JobInfo;
use crate::lock::executor::Claimed;
use crate::{Clock, Error, Job, LeaderElection, LockingTaskExecutor, RunRecord, Schedule, Tick};

/// What every job runner of one scheduler shares.
#[derive(Debug)]
pub(crate) struct Runtime {
    pub(crate) executor: Option<LockingTaskExecutor>,
    pub(crate) zone: Tz,
    pub(crate) clock: Arc<dyn Clock>,
    /// Stop firing new ticks.
    pub(crate) shutdown: CancellationToken,
    /// Ask running jobs to stop (their lock context's `cancelled()` fires).
    pub(crate) stop: CancellationToken,
    /// Abort running jobs.
    pub(crate) abort: CancellationToken,
    pub(crate) counters: ShutdownCounters,
    /// Background work besides the job loops (watchers of interrupted runs): awaited at
    /// shutdown with them.
    pub(crate) tasks: TaskTracker,
}

/// Outcomes of the runs in progress when shutdown began.
#[derive(Debug, Default)]
pub(crate) struct ShutdownCounters {
    pub(crate) finished: AtomicUsize,
    pub(crate) cancelled: AtomicUsize,
    pub(crate) aborted: AtomicUsize,
    pub(crate) locks_released: Arc<AtomicUsize>,
}

/// A job ready to run: its lock and thresholds resolved against the configuration.
pub(crate) struct PreparedJob<S> {
    pub(crate) job: Job<S>,
    pub(crate) lock: Option<ResolvedLock>,
    pub(crate) leader: Option<Arc<LeaderElection>>,
    pub(crate) misfire_threshold: Duration,
    /// The watcher of this job's interrupted runs (one at a time, kept across replacements).
    pub(crate) watch: Arc<Watch>,
}

impl<S> std::fmt::Debug for PreparedJob<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedJob")
            .field("job", &self.job.name)
            .field("schedule", &self.job.schedule)
            .finish_non_exhaustive()
    }
}

impl<S: 'static> JobInfo for PreparedJob<S> {
    fn name(&self) -> &str {
        &self.job.name
    }
    fn schedule(&self) -> &Schedule {
        &self.job.schedule
    }
    fn lock_name(&self) -> Option<&str> {
        self.lock.as_ref().map(|lock| lock.config.name())
    }
}

impl<S> Clone for PreparedJob<S> {
    fn clone(&self) -> Self {
        PreparedJob {
            job: self.job.clone(),
            lock: self.lock.clone(),
            leader: self.leader.clone(),
            misfire_threshold: self.misfire_threshold,
            watch: Arc::clone(&self.watch),
        }
    }
}

/// When a tick was due.
#[derive(Debug)]
pub(crate) struct Due {
    /// On this process's monotonic clock: lateness is measured against it.
    pub(crate) at: Instant,
    /// On the wall clock, for logs.
    pub(crate) fire: SystemTime,
    /// How much earlier another instance may have run the same tick (the tick refuses the lock if anyone took it since `at` less this).
    pub(crate) allowance: Duration,
    /// The interrupted run this tick runs again (no tick window: the dead holder's
    /// acquisition is in it).
    pub(crate) rerun: Option<Arc<RunRecord>>,
    /// A tick the fleet missed, run at start (so not judged late): refused if anyone acquired
    /// the lock within this window (back to its fire time, less the allowance).
    pub(crate) catch_up: Option<Duration>,
    /// The tick claimed in the store, which grants it once across the fleet: cron and
    /// fixed-rate ticks (`None`: fixed delay, whose instances share no fire times).
    pub(crate) claim: Option<Tick>,
    /// The lock, claimed already with the other ticks due at the same instant (the tick's
    /// checks were made before), and the heartbeat's end that went with it.
    pub(crate) claimed: Option<(Claimed, Option<Instant>)>,
}

/// Refuses to start a run of `job` once shutdown has begun: asked at the last moment before it
/// would start (ticks and `run_now` alike).
pub(crate) fn shutdown_gate(
    runtime: &Runtime,
    job: &str,
) -> impl Fn() -> Result<(), Error> + Send + Sync + 'static {
    let (shutdown, job) = (runtime.shutdown.clone(), job.to_owned());
    move || match shutdown.is_cancelled() {
        true => Err(Error::Scheduler(format!(
            "the scheduler is shutting down: job `{job}` was not started"
        ))),
        false => Ok(()),
    }
}
