//! Jobs added, replaced and removed on a running scheduler (`JobControl`), on the in-memory
//! store with tokio's paused clock: a change takes effect on the next tick, no tick runs twice
//! across a replacement (on one instance or two), a removed job's running tick finishes or is
//! cancelled (lock released, run record ended), and 10,000 changes leave other jobs' ticks be.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock_core::{InMemoryLockProvider, LockProvider, RunOutcome, RunQuery, TokioClock};
use shedlock_runtime::{
    Job, JobControl, JobLock, JobOutcome, JobRegistry, RemoveMode, RunContext, Schedule, Scheduler,
};

/// A wall clock on a minute boundary, plus half a second: cron second `s` of the minute
/// fires `s` seconds and a half into the test (paused time).
fn clock() -> Arc<TokioClock> {
    let minute = UNIX_EPOCH + Duration::from_secs(1_700_000_040);
    Arc::new(TokioClock::starting_at(minute - Duration::from_millis(500)))
}

/// The wall time of cron second `s` (of the test's minute).
fn second(s: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(1_700_000_040 + s)
}

/// An in-memory store on the test's clock.
fn store() -> InMemoryLockProvider {
    InMemoryLockProvider::new().with_clock(clock())
}

async fn start(store: &InMemoryLockProvider, jobs: Vec<Job<()>>) -> (Scheduler, JobControl<()>) {
    let registry = jobs
        .into_iter()
        .fold(JobRegistry::new(()), JobRegistry::add);
    let scheduler = Scheduler::builder()
        .provider(store.clone())
        .clock(clock())
        .registry(registry)
        .start()
        .await
        .unwrap();
    let control = scheduler.job_control::<()>().unwrap();
    (scheduler, control)
}

fn sleep(millis: u64) -> tokio::time::Sleep {
    tokio::time::sleep(Duration::from_millis(millis))
}

fn lock(name: &str) -> JobLock {
    JobLock::new(name.to_owned())
        .unwrap()
        .lock_at_most_for(Duration::from_secs(60))
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_job_added_at_runtime_runs_on_its_schedule() {
    let store = store();
    let (scheduler, control) = start(&store, Vec::new()).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let every_second = Schedule::cron("* * * * * *").unwrap();
    let job = common::counting("added", every_second.clone(), &runs).with_lock(lock("added"));
    control.add(job.clone()).await.unwrap();
    let status = scheduler.status();
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].next_fire, Some(second(0)), "{status:?}");

    sleep(5_250).await; // the ticks of seconds 0 to 4
    assert_eq!(runs.load(Ordering::SeqCst), 5);
    assert_eq!(scheduler.status()[0].executions, 5);

    let twice = control.add(job).await.unwrap_err().to_string();
    assert!(twice.contains("job `added` already exists"), "{twice}");
    let wrong = scheduler.job_control::<String>().unwrap_err().to_string();
    assert!(
        wrong.contains("`()`") && wrong.contains("String"),
        "{wrong}"
    );
    let missing = control.remove("nope", RemoveMode::Finish).await;
    assert!(
        missing
            .unwrap_err()
            .to_string()
            .contains("no job named `nope`")
    );

    scheduler.shutdown().await;
    let late = common::counting("late", every_second, &runs);
    let refused = control.add(late).await.unwrap_err().to_string();
    assert!(
        refused.contains("shutting down") && refused.contains("`late`"),
        "{refused}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 5);
}

/// Who ran which tick: the definition's label, per fire time (per second of the test for a
/// job without a lock, which knows no tick), on every instance.
#[derive(Clone)]
struct Ticks {
    seen: Arc<Mutex<BTreeMap<SystemTime, Vec<&'static str>>>>,
    /// The test's start.
    origin: tokio::time::Instant,
}

impl Ticks {
    fn new() -> Self {
        Ticks {
            seen: Arc::default(),
            origin: tokio::time::Instant::now(),
        }
    }

    fn note(&self, tick: SystemTime, label: &'static str) {
        self.seen
            .lock()
            .unwrap()
            .entry(tick)
            .or_default()
            .push(label);
    }

    /// The same job without a lock: only the timer keeps it from running a tick twice.
    fn unlocked(&self, label: &'static str, schedule: &str) -> Job<()> {
        let schedule = Schedule::cron(schedule).unwrap();
        common::sharing("unlocked", schedule, self, move |ticks: Ticks| async move {
            ticks.note(second(ticks.origin.elapsed().as_secs()), label);
            sleep(300).await;
        })
    }

    /// A per-second locked job (run 300 ms) that writes its tick down under `label`.
    fn job(&self, label: &'static str, schedule: &str, at_least_ms: u64) -> Job<()> {
        let schedule = Schedule::cron(schedule).unwrap();
        common::sharing("report", schedule, self, move |ticks: Ticks| async move {
            let tick = RunContext::current().and_then(|run| run.tick()).unwrap();
            ticks.note(tick, label);
            sleep(300).await;
        })
        .with_lock(
            lock("report")
                .lock_at_least_for(Duration::from_millis(at_least_ms))
                .unwrap(),
        )
    }

    fn seen(&self) -> BTreeMap<SystemTime, Vec<&'static str>> {
        self.seen.lock().unwrap().clone()
    }
}

#[tokio::test(start_paused = true)]
async fn a_replaced_job_runs_each_tick_once_and_loses_none() {
    let store = store();
    let ticks = Ticks::new();
    let unlocked = Ticks::new();
    let old = ticks.job("old", "* * * * * *", 0);
    // Two instances carry the job; the first changes it (as a rolling change would). The
    // first also has a job without a lock, which no store keeps from running a tick twice.
    let jobs = vec![old.clone(), unlocked.unlocked("old", "* * * * * *")];
    let (first, control) = start(&store.with_holder("a"), jobs).await;
    let (second_instance, other) = start(&store.with_holder("b"), vec![old]).await;

    // Mid-run of the tick of second 2 (it runs 2.5 s to 2.8 s): new lock settings.
    sleep(2_600).await;
    control
        .replace(ticks.job("new", "* * * * * *", 100))
        .await
        .unwrap();
    control
        .replace(unlocked.unlocked("new", "* * * * * *"))
        .await
        .unwrap();
    // Exactly at the fire time of second 4: either definition may take it, not both.
    sleep(1_900).await;
    other
        .replace(ticks.job("new", "* * * * * *", 100))
        .await
        .unwrap();
    control
        .replace(unlocked.unlocked("again", "* * * * * *"))
        .await
        .unwrap();
    // Between ticks (at 5.9 s, the tick of second 5 over): every other second from now on.
    sleep(1_400).await;
    control
        .replace(ticks.job("even", "*/2 * * * * *", 0))
        .await
        .unwrap();
    other
        .replace(ticks.job("even", "*/2 * * * * *", 0))
        .await
        .unwrap();
    control
        .replace(unlocked.unlocked("even", "*/2 * * * * *"))
        .await
        .unwrap();
    sleep(3_800).await; // up to 9.7 s
    first.shutdown().await;
    second_instance.shutdown().await;

    for seen in [ticks.seen(), unlocked.seen()] {
        let expected: Vec<SystemTime> = [0, 1, 2, 3, 4, 5, 6, 8].map(second).into();
        assert_eq!(
            seen.keys().copied().collect::<Vec<_>>(),
            expected,
            "{seen:#?}"
        );
        for (tick, runs) in &seen {
            assert_eq!(runs.len(), 1, "tick {tick:?} ran {runs:?}");
        }
        assert_eq!(
            seen[&second(2)],
            ["old"],
            "the tick in flight ran as it started"
        );
        assert_eq!(seen[&second(8)], ["even"]);
    }
    assert_eq!(unlocked.seen()[&second(3)], ["new"]);
}

/// Runs of a job in flight now, and the most ever at once.
#[derive(Clone, Default)]
struct InFlight {
    now: Arc<AtomicUsize>,
    most: Arc<AtomicUsize>,
    runs: Arc<AtomicUsize>,
}

impl InFlight {
    /// A per-second job without a lock whose runs take 1.5 s.
    fn job(&self) -> Job<()> {
        let every_second = Schedule::cron("* * * * * *").unwrap();
        common::sharing("slow", every_second, self, |runs: InFlight| async move {
            let now = runs.now.fetch_add(1, Ordering::SeqCst) + 1;
            runs.most.fetch_max(now, Ordering::SeqCst);
            runs.runs.fetch_add(1, Ordering::SeqCst);
            sleep(1_500).await;
            runs.now.fetch_sub(1, Ordering::SeqCst);
        })
    }
}

#[tokio::test(start_paused = true)]
async fn a_replacement_waits_for_the_old_definitions_tick_in_flight() {
    let store = store();
    let runs = InFlight::default();
    let (scheduler, control) = start(&store, vec![runs.job()]).await;
    sleep(700).await; // the tick of second 0 runs from 0.5 s to 2 s
    control.replace(runs.job()).await.unwrap();
    sleep(3_000).await; // 3.7 s: second 1 overlapped, second 2 runs (2.5 s to 4 s)
    assert_eq!(
        runs.most.load(Ordering::SeqCst),
        1,
        "two runs of the job at once"
    );
    assert_eq!(runs.runs.load(Ordering::SeqCst), 2);
    assert_eq!(scheduler.status()[0].overlapped_ticks, 1);
    scheduler.shutdown().await;
}

/// A job of `work` that sets `finished` at its end, every second.
fn long_job(name: &str, work: Duration, finished: &Arc<AtomicBool>, locked: bool) -> Job<()> {
    let job = common::sharing(
        name,
        Schedule::cron("* * * * * *").unwrap(),
        finished,
        move |finished| async move {
            tokio::time::sleep(work).await;
            finished.store(true, Ordering::SeqCst);
        },
    );
    match locked {
        true => job.with_lock(lock(name)),
        false => job,
    }
}

#[tokio::test(start_paused = true)]
async fn a_removed_job_finishes_its_running_tick_and_starts_no_other() {
    let store = store();
    let finished = Arc::new(AtomicBool::new(false));
    let job = long_job("slow", Duration::from_millis(2_500), &finished, true);
    let (scheduler, control) = start(&store, vec![job]).await;

    sleep(1_000).await; // the tick of second 0 runs since 0.5 s
    assert!(scheduler.status()[0].running);
    let last = control.remove("slow", RemoveMode::Finish).await.unwrap();
    assert!(
        finished.load(Ordering::SeqCst),
        "removal returned before the run ended"
    );
    assert!(
        matches!(last.last_outcome, Some(JobOutcome::Executed { .. })),
        "{last:?}"
    );
    assert_eq!((last.executions, last.next_fire), (1, None));
    assert!(scheduler.status().is_empty());

    finished.store(false, Ordering::SeqCst);
    sleep(5_000).await;
    assert!(
        !finished.load(Ordering::SeqCst),
        "a tick ran after the removal"
    );
    let record = store
        .inspector()
        .unwrap()
        .lock_record("slow")
        .await
        .unwrap();
    assert!(!record.unwrap().held, "the lock is still held");
    // The name is free again.
    let again = long_job("slow", Duration::from_millis(10), &finished, true);
    control.add(again).await.unwrap();
    sleep(1_000).await;
    assert!(finished.load(Ordering::SeqCst));
    scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_job_removed_with_cancel_is_dropped_its_lock_released_and_its_run_ended() {
    let store = store();
    let (locked_done, unlocked_done) = (Arc::default(), Arc::default());
    let hour = Duration::from_secs(3_600);
    let jobs = vec![
        long_job("stuck", hour, &locked_done, true),
        long_job("stuck_unlocked", hour, &unlocked_done, false),
    ];
    let (scheduler, control) = start(&store, jobs).await;

    sleep(1_000).await;
    assert!(scheduler.status().iter().all(|job| job.running));
    for name in ["stuck", "stuck_unlocked"] {
        let last = control.remove(name, RemoveMode::Cancel).await.unwrap();
        assert_eq!(last.last_outcome, Some(JobOutcome::Aborted), "{last:?}");
    }
    assert!(!locked_done.load(Ordering::SeqCst) && !unlocked_done.load(Ordering::SeqCst));
    assert!(scheduler.status().is_empty());
    let record = store
        .inspector()
        .unwrap()
        .lock_record("stuck")
        .await
        .unwrap();
    assert!(
        !record.unwrap().held,
        "the cancelled run's lock is still held"
    );
    let runs = store.run_log().unwrap();
    let runs = runs.runs(&RunQuery::lock("stuck")).await.unwrap();
    assert_eq!(runs.len(), 1, "{runs:#?}");
    assert_eq!(runs[0].outcome, RunOutcome::Interrupted);
    let error = runs[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("removed"), "{error}");

    sleep(3_000).await;
    assert_eq!(scheduler.shutdown().await.aborted, 0, "nothing else ran");
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_jobs_added_replaced_and_removed_leave_other_ticks_be() {
    const JOBS: usize = 10_000;
    let store = store();
    let anchor_runs = Arc::new(AtomicUsize::new(0));
    let every_second = Schedule::cron("* * * * * *").unwrap();
    let anchor = common::counting("anchor", every_second, &anchor_runs).with_lock(lock("anchor"));
    let (scheduler, control) = start(&store, vec![anchor]).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let tenant = |i: usize, second: u32| {
        let schedule = Schedule::cron(&format!("{second} * * * * *")).unwrap();
        common::counting(&format!("tenant-{i}"), schedule, &runs)
    };

    // At 0.25 s: 10,000 tenants who run at second 2 (2.5 s).
    sleep(250).await;
    for i in 0..JOBS {
        control.add(tenant(i, 2)).await.unwrap();
    }
    assert_eq!(scheduler.status().len(), JOBS + 1);
    sleep(3_000).await; // 3.25 s
    assert_eq!(runs.load(Ordering::SeqCst), JOBS);
    // Each moves to second 5 (5.5 s).
    for i in 0..JOBS {
        control.replace(tenant(i, 5)).await.unwrap();
    }
    sleep(3_000).await; // 6.25 s
    assert_eq!(runs.load(Ordering::SeqCst), 2 * JOBS);
    // Moved to second 8 (8.5 s), then removed before it comes.
    for i in 0..JOBS {
        control.replace(tenant(i, 8)).await.unwrap();
    }
    for i in 0..JOBS {
        let name = format!("tenant-{i}");
        control.remove(&name, RemoveMode::Finish).await.unwrap();
    }
    sleep(3_000).await; // 9.25 s
    assert_eq!(
        runs.load(Ordering::SeqCst),
        2 * JOBS,
        "a removed tenant ran"
    );

    let status = scheduler.status();
    assert_eq!(status.len(), 1, "{:?}", &status[..status.len().min(3)]);
    assert_eq!(
        anchor_runs.load(Ordering::SeqCst),
        9,
        "ticks of seconds 0 to 8"
    );
    let anchor = &status[0];
    assert_eq!(
        (anchor.missed_ticks, anchor.overlapped_ticks),
        (0, 0),
        "{anchor:?}"
    );
    scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_job_cancelled_in_its_retry_backoff_ends_the_tick_in_its_records() {
    let store = store();
    let failing = common::sharing(
        "flaky",
        Schedule::cron("* * * * * *").unwrap(),
        &(),
        |()| async { Err::<(), _>("no luck") },
    )
    .with_lock(lock("flaky").retries(3, Duration::from_secs(10)));
    let (scheduler, control) = start(&store, vec![failing]).await;
    sleep(1_000).await; // attempt 1 failed at 0.5 s; its retry waits until 10.5 s
    let last = control.remove("flaky", RemoveMode::Cancel).await.unwrap();
    assert_eq!(last.last_outcome, Some(JobOutcome::Aborted), "{last:?}");

    let log = store.run_log().unwrap();
    let mut runs = log.runs(&RunQuery::lock("flaky")).await.unwrap();
    runs.sort_by_key(|run| run.attempt);
    let outcomes: Vec<_> = runs.iter().map(|run| (run.attempt, run.outcome)).collect();
    // The retry that never ran is ended at once: no instance takes the tick for cut short.
    assert_eq!(
        outcomes,
        [(1, RunOutcome::Retried), (2, RunOutcome::Interrupted)],
        "{runs:#?}"
    );
    let record = store
        .inspector()
        .unwrap()
        .lock_record("flaky")
        .await
        .unwrap();
    assert!(!record.unwrap().held);
    scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_fixed_rate_job_replaced_mid_period_keeps_its_grid() {
    let store = store();
    let runs = Arc::new(AtomicUsize::new(0));
    let rate = |at_least_ms| {
        let every_second = Schedule::fixed_rate(Duration::from_secs(1)).unwrap();
        let lock = lock("rate")
            .lock_at_least_for(Duration::from_millis(at_least_ms))
            .unwrap();
        common::counting("rate", every_second, &runs).with_lock(lock)
    };
    let (scheduler, control) = start(&store, vec![rate(0)]).await;
    sleep(2_400).await; // ticks at 0, 1 and 2 s
    control.replace(rate(100)).await.unwrap();
    sleep(3_000).await; // 3, 4 and 5 s, on the same grid
    let status = &scheduler.status()[0];
    assert_eq!(runs.load(Ordering::SeqCst), 6, "{status:?}");
    assert_eq!((status.skips, status.missed_ticks), (0, 0), "{status:?}");
    scheduler.shutdown().await;
}
