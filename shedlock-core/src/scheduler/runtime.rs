//! What the job runners of one scheduler share, and what passes between waiting for a tick
//! (`runner`) and running it (`tick`).

use std::sync::Arc;
use std::sync::atomic::AtomicUsize;
use std::time::{Duration, SystemTime};

use chrono_tz::Tz;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::{Clock, Error, Job, LeaderElection, LockConfiguration, LockingTaskExecutor};

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
    pub(crate) lock: Option<LockConfiguration>,
    pub(crate) keep_alive: Option<Duration>,
    pub(crate) leader: Option<Arc<LeaderElection>>,
    pub(crate) misfire_threshold: Duration,
}

/// When a tick was due.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Due {
    /// On this process's monotonic clock: lateness is measured against it.
    pub(crate) at: Instant,
    /// On the wall clock, for logs.
    pub(crate) fire: SystemTime,
    /// How much earlier another instance may have run the same tick (see `TickWindow`).
    pub(crate) allowance: Duration,
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
