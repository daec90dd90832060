//! What the scheduler reports: per-job status and the shutdown summary.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use super::recovery::Watch;
use crate::Schedule;
use crate::metrics::JobMetrics;

/// How a job's last tick ended.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum JobOutcome {
    /// The job ran and returned normally.
    Executed {
        /// How long it ran.
        duration: Duration,
    },
    /// Another instance held the lock; the job did not run.
    Skipped,
    /// A leader-only job's tick came while this instance did not lead; it was skipped.
    NotLeader,
    /// The job is paused across the fleet (`shedlock jobs pause`,
    /// [`Fleet::pause`](shedlock_core::Fleet::pause));
    /// the tick was skipped.
    Paused,
    /// The tick would have started more than the misfire threshold after its fire time (a
    /// process pause, an overloaded host); it was not run.
    Missed {
        /// How late it was when the scheduler got to it.
        late: Duration,
    },
    /// The leadership of a leader-only job ended while it ran. A job without a lock was
    /// cancelled then; a locked one was told through its lock context's `cancelled()` and ran
    /// to its end.
    LeadershipLost,
    /// The job returned an error (its display text).
    Failed(String),
    /// The job panicked (the panic message).
    Panicked(String),
    /// The lock store failed on acquire; the job did not run this tick.
    StoreError(String),
    /// The job was aborted: at shutdown after ignoring the stop signal, or when it was removed
    /// with [`RemoveMode::Cancel`](crate::RemoveMode::Cancel) while it ran.
    Aborted,
}

/// A registered job as the scheduler sees it now.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct JobStatus {
    /// The job's name.
    pub name: String,
    /// Its schedule, in words.
    pub schedule: String,
    /// The lock it runs under, if any.
    pub lock_name: Option<String>,
    /// When it fires next (wall clock), if known.
    pub next_fire: Option<SystemTime>,
    /// Whether a run is in progress on this instance.
    pub running: bool,
    /// How the last tick ended.
    pub last_outcome: Option<JobOutcome>,
    /// Runs on this instance so far.
    pub executions: u64,
    /// Ticks skipped because another instance held the lock.
    pub skips: u64,
    /// Ticks skipped because this instance's previous run was still going (no self-overlap).
    pub overlapped_ticks: u64,
    /// Ticks not run because the scheduler got to them too late (see `misfire_threshold`), or
    /// because a later fire time had already come (after a pause only the latest runs).
    pub missed_ticks: u64,
    /// Ticks not run because the lock store failed on acquire.
    pub store_errors: u64,
}

/// What [`Scheduler::shutdown`](crate::Scheduler::shutdown) did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Runs that finished on their own within the grace period.
    pub finished: usize,
    /// Runs that finished after being asked to stop (the lock context's `cancelled()` fired).
    pub cancelled: usize,
    /// Runs aborted because they did not stop in time.
    pub aborted: usize,
    /// Locks released during shutdown.
    pub locks_released: usize,
}

/// Live status of one job, updated by its runner; kept across replacements of its
/// definition. The job's name, schedule and lock are read from its definition when asked:
/// 100,000 jobs keep no copies of them, and a job that never ticked keeps no counters.
#[derive(Debug, Default)]
pub(crate) struct JobState {
    next_fire: Mutex<Option<SystemTime>>,
    running: AtomicBool,
    /// The watcher of the job's interrupted runs (one at a time, whatever its definition).
    pub(crate) watch: Watch,
    /// Created at the job's first outcome.
    ticks: OnceLock<Box<Ticks>>,
}

/// What a job's ticks so far came to.
#[derive(Debug, Default)]
struct Ticks {
    last_outcome: Mutex<Option<JobOutcome>>,
    executions: AtomicU64,
    skips: AtomicU64,
    overlapped_ticks: AtomicU64,
    missed_ticks: AtomicU64,
    store_errors: AtomicU64,
    metrics: JobMetrics,
    /// When this instance last gave back a stale grant of the job's lock unused.
    given_back: Mutex<Option<tokio::time::Instant>>,
}

/// What a job's status shows of its definition.
pub(crate) trait JobInfo: Send + Sync + std::fmt::Debug {
    fn name(&self) -> &str;
    fn schedule(&self) -> &Schedule;
    fn lock_name(&self) -> Option<&str>;
}

impl JobState {
    pub(crate) fn new() -> Self {
        JobState::default()
    }

    fn ticks(&self) -> &Ticks {
        self.ticks.get_or_init(Box::default)
    }

    /// A grant of the job's lock was given back unused at `at` (it came after the next fire
    /// time): acquisitions up to then were this instance's own.
    pub(crate) fn gave_back(&self, at: tokio::time::Instant) {
        *self
            .ticks()
            .given_back
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(at);
    }

    /// The allowance of a tick due at `due` (acquisitions within it before the tick count as
    /// the tick's, made by an instance whose clock runs ahead), cut so that it begins after
    /// this instance's own grant given back, which is no other instance's run.
    pub(crate) fn allowance(&self, due: tokio::time::Instant, allowance: Duration) -> Duration {
        let given_back = self
            .ticks
            .get()
            .and_then(|ticks| *ticks.given_back.lock().unwrap_or_else(|e| e.into_inner()));
        match given_back {
            Some(at) if at + allowance > due => due.saturating_duration_since(at),
            _ => allowance,
        }
    }

    pub(crate) fn set_next_fire(&self, next: Option<SystemTime>) {
        *self.next_fire.lock().unwrap_or_else(|e| e.into_inner()) = next;
    }

    /// The job `job`'s tick is being handled, or no longer.
    pub(crate) fn set_running(&self, job: &str, running: bool) {
        self.running.store(running, Ordering::Release);
        self.ticks().metrics.running(job, running);
    }

    /// Ticks missed while the previous run went on; the run's own outcome stays recorded.
    pub(crate) fn record_overlap(&self, job: &str, missed: u32) {
        let ticks = self.ticks();
        ticks
            .overlapped_ticks
            .fetch_add(u64::from(missed), Ordering::Relaxed);
        ticks.metrics.missed(job, missed);
    }

    /// Fire times passed over without a run (a pause carried the scheduler past them).
    pub(crate) fn record_missed(&self, job: &str, missed: u32) {
        let ticks = self.ticks();
        ticks
            .missed_ticks
            .fetch_add(u64::from(missed), Ordering::Relaxed);
        ticks.metrics.missed(job, missed);
    }

    /// How a tick of the job `job` ended.
    pub(crate) fn record(&self, job: &str, outcome: JobOutcome) {
        let ticks = self.ticks();
        ticks.metrics.outcome(job, &outcome);
        match outcome {
            JobOutcome::Skipped => {
                ticks.skips.fetch_add(1, Ordering::Relaxed);
            }
            JobOutcome::Missed { .. } => self.record_missed(job, 1),
            JobOutcome::StoreError(_) => {
                ticks.store_errors.fetch_add(1, Ordering::Relaxed);
            }
            JobOutcome::NotLeader | JobOutcome::Paused => {}
            _ => {
                ticks.executions.fetch_add(1, Ordering::Relaxed);
            }
        }
        *ticks.last_outcome.lock().unwrap_or_else(|e| e.into_inner()) = Some(outcome);
    }

    /// The status of the job `job` (its current definition).
    pub(crate) fn snapshot(&self, job: &dyn JobInfo) -> JobStatus {
        let ticks = self.ticks.get();
        let count = |counter: fn(&Ticks) -> &AtomicU64| {
            ticks.map_or(0, |ticks| counter(ticks).load(Ordering::Relaxed))
        };
        JobStatus {
            name: job.name().to_owned(),
            schedule: job.schedule().to_string(),
            lock_name: job.lock_name().map(str::to_owned),
            next_fire: *self.next_fire.lock().unwrap_or_else(|e| e.into_inner()),
            running: self.running.load(Ordering::Acquire),
            last_outcome: ticks.and_then(|ticks| {
                ticks
                    .last_outcome
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone()
            }),
            executions: count(|ticks| &ticks.executions),
            skips: count(|ticks| &ticks.skips),
            overlapped_ticks: count(|ticks| &ticks.overlapped_ticks),
            missed_ticks: count(|ticks| &ticks.missed_ticks),
            store_errors: count(|ticks| &ticks.store_errors),
        }
    }
}
