//! Crash recovery on the in-memory store, in paused time: heartbeat leases, reruns of
//! interrupted ticks, retries, catch-up after a fleet-wide outage, and the run records behind
//! them. An instance "dies" by losing its store (every call fails, as for a killed process
//! whose lease nobody renews) while its job hangs.

mod common;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use common::Cuttable;
use shedlock_core::{
    InMemoryLockProvider, LockInspector, RunLog, RunOutcome, RunQuery, RunRecord, TokioClock,
};
use shedlock_runtime::{
    Job, JobLock, JobOutcome, JobRegistry, LockContext, OnInterrupted, Schedule, Scheduler,
    SchedulerConfig,
};

/// 2026-11-25T10:00:30Z: half a minute before a whole minute.
const ORIGIN: u64 = 1_795_600_830;

/// A run's tick and attempt, as `RunContext` says.
type TickAttempt = (Option<SystemTime>, u32);

#[derive(Debug, Clone, PartialEq, Eq)]
struct Start {
    holder: String,
    token: u64,
    /// Paused seconds since the test began.
    second: u64,
}

/// What the instances saw, and which instance "dies" in its first run.
#[derive(Clone)]
struct Fleet {
    store: InMemoryLockProvider,
    origin: tokio::time::Instant,
    starts: Arc<Mutex<Vec<Start>>>,
    cuts: Arc<Mutex<HashMap<String, Arc<AtomicBool>>>>,
    /// Set once an instance died: only the first run dies.
    died: Arc<AtomicBool>,
    /// What `RunContext` told each run of the dying job: tick and attempt.
    contexts: Arc<Mutex<Vec<TickAttempt>>>,
}

impl Fleet {
    fn new(at: SystemTime) -> Self {
        Fleet {
            store: InMemoryLockProvider::new().with_clock(Arc::new(TokioClock::starting_at(at))),
            origin: tokio::time::Instant::now(),
            starts: Arc::default(),
            cuts: Arc::default(),
            died: Arc::default(),
            contexts: Arc::default(),
        }
    }

    fn record_start(&self) -> String {
        let context = LockContext::current().expect("a locked job");
        self.starts.lock().unwrap().push(Start {
            holder: context.holder(),
            token: context.fencing_token(),
            second: self.origin.elapsed().as_secs(),
        });
        context.holder()
    }

    /// The job body: the first run anywhere loses its store and hangs; others take `work`.
    fn dying_job(&self, lock: JobLock, work: Duration) -> Job<()> {
        let every_minute = Schedule::cron("0 * * * * *").unwrap();
        common::sharing("report", every_minute, self, move |fleet| async move {
            let holder = fleet.record_start();
            let run = shedlock_runtime::RunContext::current().expect("a scheduled run");
            fleet
                .contexts
                .lock()
                .unwrap()
                .push((run.tick(), run.attempt()));
            if !fleet.died.swap(true, Ordering::SeqCst) {
                fleet.cuts.lock().unwrap()[&holder].store(true, Ordering::SeqCst);
                std::future::pending::<()>().await;
            }
            tokio::time::sleep(work).await;
        })
        .with_lock(lock)
    }

    async fn start(
        &self,
        holder: &str,
        job: &Job<()>,
        config: SchedulerConfig,
        at: SystemTime,
    ) -> Scheduler {
        let cut = Arc::new(AtomicBool::new(false));
        self.cuts
            .lock()
            .unwrap()
            .insert(holder.to_owned(), Arc::clone(&cut));
        Scheduler::builder()
            .provider(Cuttable {
                inner: self.store.with_holder(holder),
                cut,
            })
            .clock(Arc::new(TokioClock::starting_at(at)))
            .config(config)
            .registry(JobRegistry::new(()).add(job.clone()))
            .start()
            .await
            .unwrap()
    }

    /// One instance per holder, all started at `at` with the default `config()`.
    async fn start_all(&self, holders: &[&str], job: &Job<()>, at: SystemTime) -> Vec<Scheduler> {
        let mut instances = Vec::new();
        for holder in holders {
            instances.push(self.start(holder, job, config(), at).await);
        }
        instances
    }

    /// The whole fleet goes down during its first run: `a` starts at `ORIGIN`, its run of
    /// second 30 hangs and it is gone at second 45 (the run hangs without its store); at second
    /// 65, when a's lease (30 s from second 30) is gone and the next tick is 25 s away, `b`
    /// starts, returned.
    async fn down_and_back(&self, job: &Job<()>) -> Scheduler {
        let a = self.start("a", job, config(), at(ORIGIN)).await;
        tokio::time::sleep(Duration::from_secs(45)).await;
        drop(a);
        tokio::time::sleep(Duration::from_secs(20)).await;
        self.start("b", job, config(), at(ORIGIN + 65)).await
    }

    /// Runs `job` on `count` instances (holders `a`, `b`, …), started at `ORIGIN`, for
    /// `duration`.
    async fn run_for(&self, count: usize, job: &Job<()>, duration: Duration) {
        let instances = self
            .start_all(&["a", "b", "c"][..count], job, at(ORIGIN))
            .await;
        tokio::time::sleep(duration).await;
        stop(&instances).await;
    }

    fn starts(&self) -> Vec<Start> {
        self.starts.lock().unwrap().clone()
    }

    async fn runs(&self) -> Vec<RunRecord> {
        let mut runs = self.store.runs(&RunQuery::lock("report")).await.unwrap();
        runs.reverse();
        runs
    }

    /// The runs, oldest first, as `view` shows each.
    async fn runs_as<T>(&self, view: impl Fn(&RunRecord) -> T) -> Vec<T> {
        self.runs().await.iter().map(view).collect()
    }
}

fn at(seconds: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(seconds)
}

fn lock() -> JobLock {
    JobLock::new("report")
        .unwrap()
        .lock_at_most_for(Duration::from_secs(600))
        .unwrap()
}

/// The lock, with an interrupted run run again.
fn rerun() -> JobLock {
    lock().on_interrupted(OnInterrupted::Rerun)
}

fn config() -> SchedulerConfig {
    SchedulerConfig {
        shutdown_grace_period: Duration::from_secs(1),
        shutdown_cancel_period: Duration::from_secs(1),
        ..SchedulerConfig::default()
    }
}

async fn stop(instances: &[Scheduler]) {
    for instance in instances {
        instance.shutdown().await;
    }
}

#[tokio::test(start_paused = true)]
async fn an_interrupted_run_is_rerun_once_within_a_lease() {
    let fleet = Fleet::new(at(ORIGIN));
    let job = fleet.dying_job(rerun(), Duration::from_secs(1));
    fleet.run_for(2, &job, Duration::from_secs(155)).await;

    let starts = fleet.starts();
    // Tick 10:01:00 (second 30): one dies, the other reruns it; then 10:02:00 and 10:03:00 once each.
    assert_eq!(starts.len(), 4, "{starts:?}");
    let (dead, rerun) = (&starts[0], &starts[1]);
    assert_eq!(dead.second, 30, "{starts:?}");
    assert_ne!(dead.holder, rerun.holder);
    assert!(
        rerun.token > dead.token,
        "the rerun holds a newer token: {starts:?}"
    );
    // The dead holder renewed nothing: its lease (the 30 s run lease) ran out, then the rerun.
    assert!(
        (60..=62).contains(&rerun.second),
        "rerun within about one run lease, not lock_at_most_for: {starts:?}"
    );
    assert_eq!(starts[2].second, 90, "{starts:?}");
    assert_eq!(starts[3].second, 150, "{starts:?}");

    let runs = fleet.runs().await;
    assert_eq!(runs.len(), 4, "{runs:#?}");
    assert_eq!(runs[0].outcome, RunOutcome::Interrupted, "{runs:#?}");
    assert_eq!(
        (runs[1].outcome, runs[1].attempt),
        (RunOutcome::Succeeded, 2)
    );
    assert_eq!(runs[0].tick, runs[1].tick, "the same tick ran again");
    assert_eq!(runs[0].tick, Some(at(ORIGIN + 30)));
    let contexts = fleet.contexts.lock().unwrap().clone();
    assert_eq!(
        contexts[..2],
        [(Some(at(ORIGIN + 30)), 1), (Some(at(ORIGIN + 30)), 2)],
        "the rerun knows the tick it runs again"
    );
}

/// When each run of a job began and ended (its future completed or was dropped), in paused
/// seconds, by holder.
#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Span>>>);

/// Holder, start and end of one run (paused seconds).
type Span = (String, u64, Option<u64>);

struct Ends {
    spans: Spans,
    index: usize,
    origin: tokio::time::Instant,
}

impl Drop for Ends {
    fn drop(&mut self) {
        self.spans.0.lock().unwrap()[self.index].2 = Some(self.origin.elapsed().as_secs());
    }
}

impl Spans {
    fn begin(&self, holder: String, origin: tokio::time::Instant) -> Ends {
        let mut spans = self.0.lock().unwrap();
        spans.push((holder, origin.elapsed().as_secs(), None));
        Ends {
            spans: self.clone(),
            index: spans.len() - 1,
            origin,
        }
    }

    fn get(&self) -> Vec<Span> {
        self.0.lock().unwrap().clone()
    }
}

/// A job whose first run (anywhere) takes `first` and, if `cut_for` is set, loses its store
/// that long from its start; later runs take a second.
fn long_first_run(
    fleet: &Fleet,
    spans: &Spans,
    first: Duration,
    cut_for: Option<Duration>,
) -> Job<()> {
    let every_minute = Schedule::cron("0 * * * * *").unwrap();
    let spans = spans.clone();
    common::sharing("report", every_minute, fleet, move |fleet| {
        let spans = spans.clone();
        async move {
            let holder = fleet.record_start();
            let _ends = spans.begin(holder.clone(), fleet.origin);
            if fleet.died.swap(true, Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_secs(1)).await;
                return;
            }
            if let Some(cut_for) = cut_for {
                let cut = Arc::clone(&fleet.cuts.lock().unwrap()[&holder]);
                cut.store(true, Ordering::SeqCst);
                tokio::spawn(async move {
                    tokio::time::sleep(cut_for).await;
                    cut.store(false, Ordering::SeqCst);
                });
            }
            tokio::time::sleep(first).await;
        }
    })
    .with_lock(
        JobLock::new("report")
            .unwrap()
            .lock_at_most_for(Duration::from_secs(20))
            .unwrap()
            .on_interrupted(OnInterrupted::Rerun),
    )
}

/// Issue 29 item 3: a job that runs past `lock_at_most_for` loses its lock, but not its run:
/// its run heartbeat goes on, so the instance that skipped the tick waits for it instead of
/// running the tick a second time beside it; the run's success is recorded.
#[tokio::test(start_paused = true)]
async fn a_run_past_lock_at_most_for_is_not_rerun_beside_itself() {
    let fleet = Fleet::new(at(ORIGIN));
    let spans = Spans::default();
    let job = long_first_run(&fleet, &spans, Duration::from_secs(50), None);
    fleet.run_for(2, &job, Duration::from_secs(100)).await;

    let spans = spans.get();
    // Tick 10:01:00 (second 30) runs 50 s, its lock gone after 20; then 10:02:00 (second 90).
    assert_eq!(
        spans.iter().map(|s| (s.1, s.2)).collect::<Vec<_>>(),
        [(30, Some(80)), (90, Some(91))],
        "one run per tick, none beside the long one: {spans:?}"
    );
    let runs = fleet.runs().await;
    assert_eq!(runs.len(), 2, "{runs:#?}");
    assert_eq!(
        (runs[0].tick, runs[0].attempt, runs[0].outcome),
        (Some(at(ORIGIN + 30)), 1, RunOutcome::Succeeded),
        "the long run's own end stays: {runs:#?}"
    );
}

/// Issue 29 item 3: an instance whose store is away longer than its run heartbeat stops the
/// run before the heartbeat can pass in the store, so the instance that reruns the tick never
/// runs it beside the first; the records say the first was interrupted and the second ran.
#[tokio::test(start_paused = true)]
async fn a_run_cut_from_its_store_stops_before_it_is_rerun() {
    let fleet = Fleet::new(at(ORIGIN));
    let spans = Spans::default();
    let job = long_first_run(
        &fleet,
        &spans,
        Duration::from_secs(300),
        Some(Duration::from_secs(45)),
    );
    fleet.run_for(2, &job, Duration::from_secs(100)).await;

    let spans = spans.get();
    assert!(spans.len() >= 2, "the tick ran again: {spans:?}");
    let (first, rerun) = (&spans[0], &spans[1]);
    assert_ne!(first.0, rerun.0, "{spans:?}");
    let first_end = first.2.expect("the cut run was stopped");
    assert!(
        first_end <= rerun.1,
        "the rerun started at {} while the first still ran (until {first_end}): {spans:?}",
        rerun.1
    );
    assert!(
        first_end < 30 + 300,
        "stopped at its heartbeat, not at its end: {spans:?}"
    );
    let runs = fleet.runs().await;
    assert_eq!(
        runs.iter()
            .take(2)
            .map(|r| (r.tick, r.attempt, r.outcome))
            .collect::<Vec<_>>(),
        [
            (Some(at(ORIGIN + 30)), 1, RunOutcome::Interrupted),
            (Some(at(ORIGIN + 30)), 2, RunOutcome::Succeeded),
        ],
        "{runs:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn by_default_an_interrupted_tick_is_skipped_and_the_next_runs_after_one_lease() {
    let fleet = Fleet::new(at(ORIGIN));
    let job = fleet.dying_job(lock(), Duration::from_secs(1));
    fleet.run_for(2, &job, Duration::from_secs(100)).await;

    let seconds: Vec<u64> = fleet.starts().iter().map(|s| s.second).collect();
    // Without the heartbeat lease, the next tick (second 90) would wait for lock_at_most_for.
    assert_eq!(seconds, [30, 90], "{:?}", fleet.starts());
    let runs = fleet.runs().await;
    assert_eq!(
        runs[0].outcome,
        RunOutcome::Running,
        "nobody marks a skipped tick: {runs:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn runs_that_finish_are_never_rerun() {
    let fleet = Fleet::new(at(ORIGIN));
    fleet.died.store(true, Ordering::SeqCst); // nobody dies
    let job = fleet.dying_job(rerun(), Duration::from_secs(40));
    fleet.run_for(3, &job, Duration::from_secs(255)).await;

    let seconds: Vec<u64> = fleet.starts().iter().map(|s| s.second).collect();
    assert_eq!(seconds, [30, 90, 150, 210], "{:?}", fleet.starts());
    let runs = fleet.runs().await;
    assert!(
        runs.iter()
            .all(|r| r.outcome == RunOutcome::Succeeded && r.attempt == 1),
        "{runs:#?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_interrupted_while_the_whole_fleet_was_down_is_rerun_at_start() {
    let fleet = Fleet::new(at(ORIGIN));
    let job = fleet.dying_job(rerun(), Duration::from_secs(1));
    let b = fleet.down_and_back(&job).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    stop(&[b]).await;

    let starts = fleet.starts();
    assert_eq!(starts.len(), 2, "{starts:?}");
    assert_eq!((starts[1].holder.as_str(), starts[1].second), ("b", 65));
    let runs = fleet.runs().await;
    assert_eq!(runs[1].tick, Some(at(ORIGIN + 30)), "{runs:#?}");
    assert_eq!(
        (runs[1].outcome, runs[1].attempt),
        (RunOutcome::Succeeded, 2)
    );
}

/// Shutdown waits for a rerun as for any running tick: the watcher that started it stopped
/// following at shutdown and dropped the tick, whose run went on unwatched, so `shutdown`
/// returned with the rerun's record still `Running` (seen on CI in `recovery_zookeeper`).
#[tokio::test(start_paused = true)]
async fn shutdown_waits_for_a_rerun_in_progress() {
    let fleet = Fleet::new(at(ORIGIN));
    let job = fleet.dying_job(rerun(), Duration::from_millis(500));
    // b reruns a's tick at once; shut down while that rerun runs.
    let b = fleet.down_and_back(&job).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(fleet.starts().len(), 2, "the rerun has started");
    let report = b.shutdown().await;

    let runs = fleet.runs().await;
    assert_eq!(
        (runs[1].outcome, runs[1].attempt),
        (RunOutcome::Succeeded, 2),
        "{runs:#?}"
    );
    assert_eq!(report.finished, 1, "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn a_rerun_that_dies_too_is_rerun_again() {
    let fleet = Fleet::new(at(ORIGIN));
    let deaths = Arc::new(AtomicU32::new(0));
    let hourly = Schedule::cron("0 0 * * * *").unwrap();
    let shared = (fleet.clone(), Arc::clone(&deaths));
    let job = common::sharing("report", hourly, &shared, |(fleet, deaths)| async move {
        let holder = fleet.record_start();
        if deaths.fetch_add(1, Ordering::SeqCst) < 2 {
            fleet.cuts.lock().unwrap()[&holder].store(true, Ordering::SeqCst);
            std::future::pending::<()>().await;
        }
    })
    .with_lock(rerun());
    let origin = ORIGIN - 30 + 3600 - 10; // ten seconds before a whole hour
    let instances = fleet.start_all(&["a", "b", "c"], &job, at(origin)).await;
    tokio::time::sleep(Duration::from_secs(200)).await;
    stop(&instances).await;

    let starts = fleet.starts();
    let holders: Vec<&str> = starts.iter().map(|s| s.holder.as_str()).collect();
    assert_eq!(starts.len(), 3, "{starts:?}");
    let mut unique = holders.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(
        unique.len(),
        3,
        "each rerun on a surviving instance: {starts:?}"
    );
    let runs = fleet.runs().await;
    let outcomes: Vec<(RunOutcome, u32)> = runs.iter().map(|r| (r.outcome, r.attempt)).collect();
    assert_eq!(
        outcomes,
        [
            (RunOutcome::Interrupted, 1),
            (RunOutcome::Interrupted, 2),
            (RunOutcome::Succeeded, 3)
        ],
        "{runs:#?}"
    );
}

fn flaky_job(fleet: &Fleet, failures: u32, retries: u32) -> (Job<()>, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let every_minute = Schedule::cron("0 * * * * *").unwrap();
    let shared = (fleet.clone(), Arc::clone(&calls));
    let job = common::sharing(
        "report",
        every_minute,
        &shared,
        move |(fleet, calls)| async move {
            fleet.record_start();
            let call = calls.fetch_add(1, Ordering::SeqCst) + 1;
            if call <= failures {
                return Err(format!("attempt {call} failed"));
            }
            Ok(())
        },
    )
    .with_lock(lock().retries(retries, Duration::from_secs(5)));
    (job, calls)
}

#[tokio::test(start_paused = true)]
async fn failed_runs_are_retried_under_the_same_lock() {
    let fleet = Fleet::new(at(ORIGIN));
    let (job, calls) = flaky_job(&fleet, 2, 3);
    let instances = fleet.start_all(&["a", "b"], &job, at(ORIGIN)).await;
    tokio::time::sleep(Duration::from_secs(45)).await;
    let outcome = instances.iter().find_map(|s| {
        s.status()[0]
            .last_outcome
            .clone()
            .filter(|o| *o != JobOutcome::Skipped)
    });
    stop(&instances).await;

    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert!(
        matches!(outcome, Some(JobOutcome::Executed { .. })),
        "{outcome:?}"
    );
    let starts = fleet.starts();
    assert!(
        starts.iter().all(|s| s.token == starts[0].token),
        "one lock: {starts:?}"
    );
    let seconds: Vec<u64> = starts.iter().map(|s| s.second).collect();
    assert_eq!(seconds, [30, 35, 40], "retried after the backoff");
    assert_eq!(
        fleet
            .runs_as(|r| (r.attempt, r.outcome, r.error.clone()))
            .await,
        [
            (1, RunOutcome::Retried, Some("attempt 1 failed".to_owned())),
            (2, RunOutcome::Retried, Some("attempt 2 failed".to_owned())),
            (3, RunOutcome::Succeeded, None),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn retries_end_with_the_last_error() {
    let fleet = Fleet::new(at(ORIGIN));
    let (job, calls) = flaky_job(&fleet, u32::MAX, 2);
    let a = fleet.start("a", &job, config(), at(ORIGIN)).await;
    tokio::time::sleep(Duration::from_secs(45)).await;
    let outcome = a.status()[0].last_outcome.clone();
    stop(&[a]).await;

    assert_eq!(calls.load(Ordering::SeqCst), 3);
    assert_eq!(
        outcome,
        Some(JobOutcome::Failed("attempt 3 failed".to_owned()))
    );
    let runs = fleet.runs().await;
    assert_eq!(runs.last().map(|r| r.outcome), Some(RunOutcome::Failed));
}

#[tokio::test(start_paused = true)]
async fn a_panicking_run_is_recorded_as_failed() {
    let fleet = Fleet::new(at(ORIGIN));
    let job = Job::new(
        "report",
        Schedule::cron("0 * * * * *").unwrap(),
        |()| async {
            if true {
                panic!("boom");
            }
        },
    )
    .with_lock(lock().retries(3, Duration::from_secs(1)));
    let a = fleet.start("a", &job, config(), at(ORIGIN)).await;
    tokio::time::sleep(Duration::from_secs(35)).await;
    let outcome = a.status()[0].last_outcome.clone();
    stop(&[a]).await;

    assert_eq!(outcome, Some(JobOutcome::Panicked("boom".to_owned())));
    let runs = fleet.runs().await;
    assert_eq!(runs.len(), 1, "a panic is not retried: {runs:#?}");
    assert_eq!(runs[0].outcome, RunOutcome::Failed);
    assert_eq!(runs[0].error.as_deref(), Some("panicked: boom"));
}

/// What a running job saw of its lock: second of its run, held, remaining lease.
type Seen = Arc<Mutex<Vec<(u64, bool, Duration)>>>;

/// A job that runs `work`, noting the lock's record every few seconds while it runs.
fn observed_job(fleet: &Fleet, work: Duration, seen: &Seen) -> Job<()> {
    let every_minute = Schedule::cron("0 * * * * *").unwrap();
    let shared = (fleet.clone(), Arc::clone(seen));
    common::sharing(
        "report",
        every_minute,
        &shared,
        move |(fleet, seen)| async move {
            fleet.record_start();
            let started = tokio::time::Instant::now();
            while started.elapsed() < work {
                tokio::time::sleep(Duration::from_secs(2)).await;
                let record = fleet.store.lock_record("report").await.unwrap().unwrap();
                seen.lock().unwrap().push((
                    started.elapsed().as_secs(),
                    record.held,
                    record.remaining(),
                ));
            }
        },
    )
}

#[tokio::test(start_paused = true)]
async fn a_long_run_holds_a_short_renewed_lease() {
    let fleet = Fleet::new(at(ORIGIN));
    let seen = Arc::default();
    let job = observed_job(&fleet, Duration::from_secs(40), &seen).with_lock(lock());
    let config = SchedulerConfig {
        run_lease: Duration::from_secs(6),
        ..config()
    };
    let a = fleet.start("a", &job, config.clone(), at(ORIGIN)).await;
    let b = fleet.start("b", &job, config, at(ORIGIN)).await;
    tokio::time::sleep(Duration::from_secs(75)).await;
    stop(&[a, b]).await;

    let seen = seen.lock().unwrap().clone();
    assert!(seen.len() >= 19, "{seen:?}");
    for (second, held, remaining) in &seen {
        assert!(*held, "held throughout the run (second {second}): {seen:?}");
        assert!(
            *remaining <= Duration::from_secs(6),
            "the lease stays one run lease long: {seen:?}"
        );
    }
    let seconds: Vec<u64> = fleet.starts().iter().map(|s| s.second).collect();
    assert_eq!(
        seconds,
        [30],
        "the 40 s run overlapped no other: {:?}",
        fleet.starts()
    );
}

#[tokio::test(start_paused = true)]
async fn heartbeats_stop_at_lock_at_most_for() {
    let fleet = Fleet::new(at(ORIGIN));
    let seen = Arc::default();
    let job = observed_job(&fleet, Duration::from_secs(20), &seen).with_lock(
        JobLock::new("report")
            .unwrap()
            .lock_at_most_for(Duration::from_secs(10))
            .unwrap(),
    );
    let config = SchedulerConfig {
        run_lease: Duration::from_secs(3),
        ..config()
    };
    let a = fleet.start("a", &job, config, at(ORIGIN)).await;
    tokio::time::sleep(Duration::from_secs(55)).await;
    stop(&[a]).await;

    let seen = seen.lock().unwrap().clone();
    let held: Vec<(u64, bool)> = seen.iter().map(|(s, h, _)| (*s, *h)).collect();
    assert!(
        held.iter().filter(|(s, _)| *s <= 8).all(|(_, h)| *h),
        "{held:?}"
    );
    assert!(
        held.iter().filter(|(s, _)| *s >= 12).all(|(_, h)| !*h),
        "{held:?}"
    );
}

/// Starts two instances at `start` (in turn), with a nightly job in Berlin that catches up
/// missed ticks within `within`, and returns the ticks that ran.
async fn catch_up(start: SystemTime, within: Option<Duration>) -> Vec<Option<SystemTime>> {
    let fleet = Fleet::new(start);
    fleet.died.store(true, Ordering::SeqCst);
    let mut schedule = Schedule::cron("0 0 3 * * *")
        .unwrap()
        .in_zone("Europe/Berlin")
        .unwrap();
    if let Some(within) = within {
        schedule = schedule.with_catch_up(within).unwrap();
    }
    let job = common::sharing("report", schedule, &fleet, |fleet| async move {
        fleet.record_start();
    })
    .with_lock(lock());
    let a = fleet.start("a", &job, config(), start).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let b = fleet
        .start("b", &job, config(), start + Duration::from_secs(5))
        .await;
    tokio::time::sleep(Duration::from_secs(60)).await;
    stop(&[a, b]).await;
    fleet.runs().await.iter().map(|r| r.tick).collect()
}

fn utc(text: &str) -> SystemTime {
    humantime::parse_rfc3339(text).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_tick_missed_by_the_whole_fleet_is_caught_up_once() {
    let six_hours = Some(Duration::from_secs(6 * 3600));
    // 03:00 in Berlin is 02:00Z in winter, 01:00Z in summer, and 02:00Z again on the night
    // the clocks go back (a frozen summer offset would say 01:00Z).
    for (start, tick) in [
        ("2026-11-25T05:00:00Z", "2026-11-25T02:00:00Z"),
        ("2026-10-25T06:00:00Z", "2026-10-25T02:00:00Z"),
        ("2026-03-29T04:00:00Z", "2026-03-29T01:00:00Z"),
    ] {
        assert_eq!(
            catch_up(utc(start), six_hours).await,
            [Some(utc(tick))],
            "start {start}"
        );
    }
    // Beyond the bound: not caught up.
    assert_eq!(catch_up(utc("2026-11-25T09:00:00Z"), six_hours).await, []);
}

#[tokio::test(start_paused = true)]
async fn without_catch_up_a_missed_tick_stays_missed() {
    assert_eq!(catch_up(utc("2026-11-25T05:00:00Z"), None).await, []);
}

#[tokio::test]
async fn catch_up_needs_a_cron_schedule_and_a_lock() {
    assert!(
        Schedule::fixed_rate(Duration::from_secs(1))
            .unwrap()
            .with_catch_up(Duration::from_secs(60))
            .is_err()
    );
    let schedule = Schedule::cron("0 0 3 * * *")
        .unwrap()
        .with_catch_up(Duration::from_secs(60))
        .unwrap();
    let job = Job::new("unlocked", schedule, |()| async {});
    let error = Scheduler::builder()
        .provider(InMemoryLockProvider::new())
        .registry(JobRegistry::new(()).add(job))
        .start()
        .await
        .unwrap_err();
    assert!(error.to_string().contains("catch_up"), "{error}");
}

/// The store cost of a heartbeat: one extension per third of the run lease while a job runs,
/// so 6 statements a minute per running job at the default 30 s (docs/RELIABILITY.md).
#[tokio::test(start_paused = true)]
async fn a_running_job_renews_its_lease_six_times_a_minute_by_default() {
    let store =
        InMemoryLockProvider::new().with_clock(Arc::new(TokioClock::starting_at(at(ORIGIN))));
    let slow = common::Slow::new(store);
    let job = Job::new(
        "report",
        Schedule::cron("0 * * * * *").unwrap(),
        |()| async {
            tokio::time::sleep(Duration::from_secs(600)).await;
        },
    )
    .with_lock(
        JobLock::new("report")
            .unwrap()
            .lock_at_most_for(Duration::from_secs(3600))
            .unwrap(),
    );
    let builder = Scheduler::builder()
        .provider(slow.clone())
        .clock(Arc::new(TokioClock::starting_at(at(ORIGIN))))
        .config(config());
    let scheduler = common::start_one(builder, job).await;
    // The run goes from second 30 to second 630: ten minutes.
    tokio::time::sleep(Duration::from_secs(640)).await;
    scheduler.shutdown().await;
    let extensions = slow
        .journal()
        .iter()
        .filter(|e| **e == "extend sent")
        .count();
    println!("heartbeat: {extensions} extensions in a 10-minute run (run_lease 30 s)");
    assert_eq!(extensions, 60, "one per 10 s of the run");
}

/// `run_now` (like `Job::run_once` and `Job::run_latest_tick`) leaves records too, with the
/// job's retries: a run by hand has no tick.
#[tokio::test(start_paused = true)]
async fn runs_by_hand_leave_records_too() {
    let fleet = Fleet::new(at(ORIGIN));
    let (job, calls) = flaky_job(&fleet, 1, 1);
    let scheduler = fleet.start("a", &job, config(), at(ORIGIN)).await;
    let outcome = scheduler.run_now("report").await.unwrap();
    scheduler.shutdown().await;
    assert_eq!(outcome, shedlock_runtime::TaskResult::Executed(Ok(())));
    assert_eq!(calls.load(Ordering::SeqCst), 2, "retried once");
    assert_eq!(
        fleet.runs_as(|r| (r.tick, r.attempt, r.outcome)).await,
        [
            (None, 1, RunOutcome::Retried),
            (None, 2, RunOutcome::Succeeded)
        ]
    );
}
