//! What the job runners of one scheduler share, and what passes between waiting for a tick
//! (`runner`) and running it (`tick`).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, SystemTime};

use chrono_tz::Tz;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::job::{RunFn, start_lazily};
use super::plan::ResolvedLock;
use super::status::JobInfo;
use crate::lock::executor::Claimed;
use crate::{Clock, Error, LeaderElection, LockingTaskExecutor, RunRecord, Schedule, Tick};

/// What every job runner of one scheduler shares.
#[derive(Debug)]
pub(crate) struct Runtime {
    pub(crate) executor: Option<LockingTaskExecutor>,
    pub(crate) zone: Tz,
    /// The configuration's `misfire_threshold`, for jobs whose schedule sets none.
    pub(crate) misfire_threshold: Duration,
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
    /// The jobs paused across the fleet, as last polled from the store's board (empty unless
    /// the scheduler publishes its jobs).
    pub(crate) paused: super::fleet::PausedJobs,
}

/// Outcomes of the runs in progress when shutdown began.
#[derive(Debug, Default)]
pub(crate) struct ShutdownCounters {
    pub(crate) finished: AtomicUsize,
    pub(crate) cancelled: AtomicUsize,
    pub(crate) aborted: AtomicUsize,
    pub(crate) locks_released: Arc<AtomicUsize>,
}

/// A job ready to run: its lock resolved against the configuration. Of its definition only
/// what runs use is kept (100,000 jobs keep no second copy of their lock's settings), and its
/// name is shared: with its lock's when they are the same, and with every run.
pub(crate) struct PreparedJob<S> {
    pub(crate) name: Arc<str>,
    pub(crate) schedule: Schedule,
    pub(crate) run: Arc<RunFn<S>>,
    pub(crate) lock: Option<ResolvedLock>,
    pub(crate) leader: Option<Arc<LeaderElection>>,
}

impl<S> PreparedJob<S> {
    /// How late a tick may start: the schedule's threshold, else the configuration's.
    pub(crate) fn misfire_threshold(&self, runtime: &Runtime) -> Duration {
        self.schedule
            .misfire_threshold
            .unwrap_or(runtime.misfire_threshold)
    }

    /// The job's run, calling its closure only when first polled.
    pub(crate) fn start_lazily(
        &self,
        state: S,
    ) -> impl Future<Output = Result<(), String>> + use<S> {
        start_lazily(&self.run, state)
    }
}

impl<S> std::fmt::Debug for PreparedJob<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreparedJob")
            .field("job", &self.name)
            .field("schedule", &self.schedule)
            .finish_non_exhaustive()
    }
}

impl<S: 'static> JobInfo for PreparedJob<S> {
    fn name(&self) -> &str {
        &self.name
    }
    fn schedule(&self) -> &Schedule {
        &self.schedule
    }
    fn lock_name(&self) -> Option<&str> {
        self.lock.as_ref().map(|lock| lock.config.name())
    }
}

impl<S> Clone for PreparedJob<S> {
    fn clone(&self) -> Self {
        PreparedJob {
            name: Arc::clone(&self.name),
            schedule: self.schedule.clone(),
            run: Arc::clone(&self.run),
            lock: self.lock.clone(),
            leader: self.leader.clone(),
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
    job: &Arc<str>,
) -> impl Fn() -> Result<(), Error> + Send + Sync + 'static {
    let (shutdown, job) = (runtime.shutdown.clone(), Arc::clone(job));
    move || match shutdown.is_cancelled() {
        true => Err(Error::Scheduler(format!(
            "the scheduler is shutting down: job `{job}` was not started"
        ))),
        false => Ok(()),
    }
}
