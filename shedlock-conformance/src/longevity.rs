//! A month of a fleet's run history, written through a store's own [`RunLog`], and what the
//! store keeps and costs to read afterwards: the longevity test each store runs
//! ([`month_of_history`]) against its real server.
//!
//! The fleet: [`LOCKS`] locks, one job a second, [`HOURLY`] hourly jobs and the rest nightly;
//! one nightly run in five fails with an error of [`MAX_ERROR_LEN`]
//! bytes, one hourly run in fifty; the instances restart [`RESTARTS`] times over the month (a
//! holder name is `host:pid:random`, so each restart is a new holder). A real month of the
//! per-second job is 2.6 million runs; once a lock has written more than its bound
//! (`runs_per_lock` + [`RUN_TRIM_SLACK`]) what the store keeps of it no
//! longer changes, so every lock writes its real count or twice its bound, whichever is less.
//! The store keeps records under the provider's `runs_per_lock` ([`RUNS_PER_LOCK`] here, so
//! that hourly jobs pass it within the month).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use super::runs::RunsHarness;
use super::unique_lock_name;
use shedlock_core::{
    DEFAULT_RUN_RETENTION, LockProvider, MAX_ERROR_LEN, RUN_TRIM_SLACK, RunEnd, RunLog, RunOutcome,
    RunQuery, RunRecord, RunStart,
};

/// Locks (jobs) in the fleet.
pub const LOCKS: usize = 200;
/// Of which hourly; one is per-second; the rest nightly.
pub const HOURLY: usize = 20;
/// Instance restarts over the month.
pub const RESTARTS: u64 = 50;
/// The provider's `runs_per_lock` in the test.
pub const RUNS_PER_LOCK: u32 = 200;
/// Writes in flight at once (instances write concurrently).
const CONCURRENCY: usize = 8;
/// Records a page of the CLI and the dashboard reads.
const PAGE: usize = 50;
/// Records a rerun decision reads (the scheduler's look-back).
const LOOK_BACK: usize = 64;

/// What a store kept of `days` of history, and what reading it cost.
#[derive(Debug, Clone)]
pub struct Figures {
    /// Days of history written.
    pub days: u32,
    /// The lock names all start with this (for counting what the store keeps under them).
    pub prefix: String,
    /// Runs written (each a start and an end).
    pub written: u64,
    /// Records the store kept, over all the fleet's locks.
    pub kept: usize,
    /// Records kept by the lock that kept most.
    pub most_per_lock: usize,
    /// Every lock's bound: `runs_per_lock` + `RUN_TRIM_SLACK`.
    pub bound_per_lock: usize,
    /// Writing the history.
    pub write_time: Duration,
    /// Reading one page (50 records) of the per-second job's runs.
    pub one_lock_page: Duration,
    /// Reading one page of every lock's runs, newest first.
    pub all_locks_page: Duration,
    /// Bytes of that page's records (their texts).
    pub all_locks_page_bytes: usize,
    /// A rerun decision's reads: the lock's newest records and the lock itself.
    pub rerun_decision: Duration,
}

impl fmt::Display for Figures {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} day(s): {} runs written in {:.1?}; {} records kept (at most {} per lock, bound {}); \
             one lock's page {:.1?}, all locks' page {:.1?} ({} bytes), rerun decision {:.1?}",
            self.days,
            self.written,
            self.write_time,
            self.kept,
            self.most_per_lock,
            self.bound_per_lock,
            self.one_lock_page,
            self.all_locks_page,
            self.all_locks_page_bytes,
            self.rerun_decision,
        )
    }
}

/// Runs `lock` writes in `days`: its real count, or twice its bound when that is less.
fn runs_of_lock(index: usize, days: u32) -> u64 {
    let per_day: u64 = match index {
        0 => 86_400,
        i if i <= HOURLY => 24,
        _ => 1,
    };
    let cap = 2 * u64::from(RUNS_PER_LOCK + RUN_TRIM_SLACK);
    (per_day * u64::from(days)).min(cap)
}

/// Writes `days` of the fleet's history through `h`'s run log (a provider keeping
/// [`RUNS_PER_LOCK`] per lock and the default retention), reads it back as the CLI, the
/// dashboard and a rerun decision do, and returns the figures. Asserts what every store
/// guarantees: every lock within its bound, pages of the asked size, newest first.
pub async fn month_of_history<H: RunsHarness>(h: &H, days: u32) -> Figures {
    let log = h
        .run_log_keeping(DEFAULT_RUN_RETENTION, RUNS_PER_LOCK)
        .await;
    let provider = h.provider("longevity").await;
    let prefix = unique_lock_name(&format!("month{days}"));
    let locks: Vec<String> = (0..LOCKS).map(|i| format!("{prefix}-{i:03}")).collect();
    // A marker run before the history: the all-locks page reads from its start on.
    let marker = RunStart::new(format!("{prefix}-marker"), "marker", None, "longevity", 1);
    let since = log.run_started(&marker).await.expect("marker").started_at;
    log.run_finished(&marker, &RunEnd::succeeded())
        .await
        .expect("marker");
    let started = Instant::now();
    let written: u64 = futures_util::stream::iter(locks.iter().enumerate())
        .map(|(index, lock)| write_lock(Arc::clone(&log), lock, index, days))
        .buffer_unordered(CONCURRENCY)
        .fold(0, |sum, runs| async move { sum + runs })
        .await;
    let write_time = started.elapsed();

    let bound_per_lock = (RUNS_PER_LOCK + RUN_TRIM_SLACK) as usize;
    let mut kept = 0;
    let mut most_per_lock = 0;
    for (index, lock) in locks.iter().enumerate() {
        let records = log
            .runs(&RunQuery::lock(lock).limit(bound_per_lock + 1))
            .await
            .expect("read a lock's runs");
        assert!(
            records.len() <= bound_per_lock,
            "lock {index} keeps {} records, past its bound {bound_per_lock}",
            records.len()
        );
        let written = runs_of_lock(index, days);
        assert!(
            records.len() as u64 >= written.min(u64::from(RUNS_PER_LOCK)),
            "lock {index} keeps {} of {written} records: fewer than runs_per_lock",
            records.len()
        );
        kept += records.len();
        most_per_lock = most_per_lock.max(records.len());
    }

    let (one_lock_page, page) = timed(log.runs(&RunQuery::lock(&locks[0]).limit(PAGE))).await;
    let page = page.expect("one lock's page");
    assert_eq!(page.len(), PAGE);
    assert_newest_first(&page);
    let (all_locks_page, all) = timed(log.runs(&RunQuery::all().since(since).limit(PAGE))).await;
    let all = all.expect("all locks' page");
    assert_eq!(all.len(), PAGE);
    assert_newest_first(&all);
    let all_locks_page_bytes = all.iter().map(record_bytes).sum();
    let (rerun_decision, ()) = timed(rerun_reads(&log, provider.as_ref(), &locks[1])).await;

    Figures {
        days,
        prefix,
        written,
        kept,
        most_per_lock,
        bound_per_lock,
        write_time,
        one_lock_page,
        all_locks_page,
        all_locks_page_bytes,
        rerun_decision,
    }
}

/// Writes one lock's runs, as the instances of each restart would; returns how many.
async fn write_lock(log: Arc<dyn RunLog>, lock: &str, index: usize, days: u32) -> u64 {
    let runs = runs_of_lock(index, days);
    let restarts = (RESTARTS * u64::from(days)).div_ceil(30).max(1);
    let long_error = "e".repeat(MAX_ERROR_LEN);
    for run in 0..runs {
        // Restarts spread over the runs: a new holder each time.
        let restart = run * restarts / runs.max(1);
        let holder = format!(
            "web-{}:{}:{:04x}",
            restart % 3,
            1000 + restart,
            restart * 7919
        );
        let start = RunStart::new(lock, lock, None, holder, run + 1);
        log.run_started(&start).await.expect("run_started");
        let end = match index {
            0 => RunEnd::succeeded(),
            i if i <= HOURLY && run % 50 == 49 => {
                RunEnd::with_error(RunOutcome::Failed, "upstream timed out")
            }
            i if i > HOURLY && run % 5 == 4 => {
                RunEnd::with_error(RunOutcome::Failed, long_error.as_str())
            }
            _ => RunEnd::succeeded(),
        };
        log.run_finished(&start, &end).await.expect("run_finished");
    }
    runs
}

/// What a rerun decision reads: the lock's newest records, and the lock.
async fn rerun_reads(log: &Arc<dyn RunLog>, provider: &dyn LockProvider, lock: &str) {
    let records = log
        .runs(&RunQuery::lock(lock).limit(LOOK_BACK))
        .await
        .expect("a rerun decision's records");
    assert!(records.len() <= LOOK_BACK);
    if let Some(inspector) = provider.inspector() {
        inspector
            .lock_record(lock)
            .await
            .expect("a rerun decision's lock");
    }
}

fn record_bytes(record: &RunRecord) -> usize {
    record.lock.len()
        + record.job.len()
        + record.holder.len()
        + record.error.as_ref().map_or(0, String::len)
        + 64
}

fn assert_newest_first(records: &[RunRecord]) {
    assert!(
        records.windows(2).all(|w| w[0].cursor() > w[1].cursor()),
        "not newest first"
    );
}

async fn timed<T>(future: impl Future<Output = T>) -> (Duration, T) {
    let started = Instant::now();
    let value = future.await;
    (started.elapsed(), value)
}
