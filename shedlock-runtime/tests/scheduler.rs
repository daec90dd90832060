//! The scheduler on the in-memory store with tokio's paused clock: exactly-once across
//! instances, no self-overlap, panics and errors, graceful shutdown, fixed-rate catch-up.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shedlock_core::{Error, InMemoryLockProvider, LockConfiguration, TokioClock};
use shedlock_runtime::{
    Job, JobLock, JobOutcome, JobRegistry, LockContext, LockingTaskExecutor, RunContext, Schedule,
    Scheduler, SchedulerConfig,
};

/// One execution as a job saw it.
#[derive(Debug, Clone)]
struct Run {
    #[allow(dead_code, reason = "shown in failure messages")]
    holder: String,
    token: u64,
    /// Whole seconds of paused time since the test started.
    second: u64,
    /// The fire time the run belongs to.
    tick: Option<std::time::SystemTime>,
}

#[derive(Clone)]
struct Journal {
    runs: Arc<Mutex<Vec<Run>>>,
    origin: tokio::time::Instant,
}

impl Journal {
    fn new() -> Self {
        Journal {
            runs: Arc::default(),
            origin: tokio::time::Instant::now(),
        }
    }

    fn record(&self) {
        let ctx = LockContext::current().expect("locked job");
        self.runs.lock().unwrap().push(Run {
            holder: ctx.holder(),
            token: ctx.fencing_token(),
            second: self.origin.elapsed().as_secs(),
            tick: RunContext::current().and_then(|run| run.tick()),
        });
    }

    fn runs(&self) -> Vec<Run> {
        self.runs.lock().unwrap().clone()
    }
}

fn every_second_job(journal: &Journal, at_least: Duration) -> Job<()> {
    let every_second = Schedule::cron("* * * * * *").unwrap();
    common::sharing(
        "every_second",
        every_second,
        journal,
        |journal| async move { journal.record() },
    )
    .with_lock(
        JobLock::new("every_second")
            .unwrap()
            .lock_at_most_for(Duration::from_secs(10))
            .unwrap()
            .lock_at_least_for(at_least)
            .unwrap(),
    )
}

/// A per-second job (with `at_least` as its `lock_at_least_for`) on `count` instances of one
/// store: its journal and the instances.
async fn start_instances(count: usize, at_least: Duration) -> (Journal, Vec<Scheduler>) {
    start_skewed_instances(&vec![Duration::ZERO; count], at_least).await
}

/// The same, one instance per offset, each with a wall clock that far behind the store's.
async fn start_skewed_instances(
    clock_offsets: &[Duration],
    at_least: Duration,
) -> (Journal, Vec<Scheduler>) {
    let journal = Journal::new();
    let store = common::tokio_store();
    let job = every_second_job(&journal, at_least);
    // Cron fires half a second after the instances start (clocks at offset zero).
    let whole = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let now = std::time::UNIX_EPOCH + Duration::from_secs(whole) + Duration::from_millis(500);
    let mut instances = Vec::new();
    for (i, offset) in clock_offsets.iter().enumerate() {
        let scheduler = Scheduler::builder()
            .provider(store.with_holder(format!("instance-{i}")))
            .clock(Arc::new(TokioClock::starting_at(now - *offset)))
            .registry(JobRegistry::new(()).add(job.clone()))
            .start()
            .await
            .unwrap();
        instances.push(scheduler);
    }
    (journal, instances)
}

#[tokio::test(start_paused = true)]
async fn three_instances_run_every_tick_exactly_once() {
    let (journal, instances) = start_instances(3, Duration::from_millis(500)).await;
    tokio::time::sleep(Duration::from_millis(7_250)).await;
    for instance in &instances {
        instance.shutdown().await;
    }

    let runs = journal.runs();
    let seconds: Vec<u64> = runs.iter().map(|r| r.second).collect();
    assert!(runs.len() >= 7, "too few runs: {runs:?}");
    let mut unique = seconds.clone();
    unique.dedup();
    assert_eq!(unique, seconds, "a tick ran twice: {runs:?}");
    assert!(
        runs.windows(2).all(|w| w[0].token < w[1].token),
        "tokens not increasing: {runs:?}"
    );
    let skips: u64 = instances.iter().map(|s| s.status()[0].skips).sum();
    assert_eq!(
        skips as usize,
        2 * runs.len(),
        "every tick: one run, two skips"
    );
}

/// Runs of a per-second job by instances whose clocks lag the store's by `offsets`, over
/// `seconds` ticks.
async fn runs_with_skew(offsets: &[u64], at_least: Duration, seconds: u64) -> Vec<Run> {
    let offsets: Vec<Duration> = offsets
        .iter()
        .map(|&ms| Duration::from_millis(ms))
        .collect();
    let (journal, instances) = start_skewed_instances(&offsets, at_least).await;
    tokio::time::sleep(Duration::from_millis(seconds * 1000)).await;
    for instance in &instances {
        instance.shutdown().await;
    }
    journal.runs()
}

#[tokio::test(start_paused = true)]
async fn without_lock_at_least_for_a_microsecond_job_still_runs_once_per_tick() {
    // What lock_at_least_for exists for in ShedLock: instances whose triggers fire at nearly
    // the same instant each find the lock already released by the fast job. Here each tick is
    // claimed in the store, which grants it once.
    for offsets in [[0, 0, 0], [0, 120, 240]] {
        let runs = runs_with_skew(&offsets, Duration::ZERO, 4).await;
        assert_eq!(runs.len(), 4, "clocks behind by {offsets:?} ms: {runs:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn clocks_up_to_almost_a_period_apart_run_each_tick_once() {
    // Before tick claims, 400 ms apart ran every tick twice without lock_at_least_for, and
    // clocks further apart than lock_at_least_for ran ticks twice with it.
    for (offsets, at_least) in [
        ([0, 400], Duration::ZERO),
        ([0, 400], Duration::from_millis(500)),
        ([0, 900], Duration::from_millis(500)),
        ([0, 750], Duration::ZERO),
    ] {
        let runs = runs_with_skew(&offsets, at_least, 4).await;
        let mut ticks: Vec<_> = runs.iter().map(|r| r.tick.expect("a tick")).collect();
        ticks.dedup();
        assert_eq!(
            ticks.len(),
            runs.len(),
            "clocks {offsets:?} ms behind, lock_at_least_for {at_least:?}: a tick ran twice: {runs:?}"
        );
        assert!(runs.len() >= 3, "{offsets:?}: too few runs: {runs:?}");
    }
}

/// A fixed-rate job on two instances started 300 ms apart (their grids do not line up), with
/// neither `lock_at_least_for` nor a slow run to hold the lock: the fleet runs it once per
/// period, not once per instance and period as before fixed-rate ticks were claimed.
#[tokio::test(start_paused = true)]
async fn fixed_rate_runs_once_per_period_across_unaligned_instances() {
    let journal = Journal::new();
    let store = common::tokio_store();
    let every_second = Schedule::fixed_rate(Duration::from_secs(1)).unwrap();
    let job = common::sharing("rate", every_second, &journal, |journal| async move {
        journal.record()
    })
    .with_lock(JobLock::new("rate").unwrap());
    let (clock, mut instances) = (Arc::new(TokioClock::new()), Vec::new());
    for i in 0..2 {
        let builder = Scheduler::builder()
            .provider(store.with_holder(format!("instance-{i}")))
            .clock(clock.clone());
        instances.push(common::start_one(builder, job.clone()).await);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    tokio::time::sleep(Duration::from_millis(4_900)).await;
    for instance in &instances {
        instance.shutdown().await;
    }
    let runs = journal.runs();
    // Instance 0 fires at 0, 1, …, 5 s; instance 1 at 0.3, 1.3, …, 5.3 s: 12 fires.
    assert_eq!(runs.len(), 6, "one run per period: {runs:?}");
    let ticks: Vec<_> = runs.iter().map(|r| r.tick.expect("a tick")).collect();
    assert!(
        ticks
            .windows(2)
            .all(|w| w[1].duration_since(w[0]).unwrap() >= Duration::from_secs(1)),
        "runs closer than the period: {runs:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_job_never_overlaps_itself() {
    let running = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let runs = Arc::new(AtomicUsize::new(0));
    let counters = (Arc::clone(&running), Arc::clone(&peak), Arc::clone(&runs));
    let every_second = Schedule::fixed_rate(Duration::from_secs(1)).unwrap();
    let job = common::sharing("slow", every_second, &counters, |(r, p, n)| async move {
        let now = r.fetch_add(1, Ordering::SeqCst) + 1;
        p.fetch_max(now, Ordering::SeqCst);
        n.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(3_500)).await;
        r.fetch_sub(1, Ordering::SeqCst);
    });
    let scheduler = common::start_one(Scheduler::builder(), job).await;
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(
        peak.load(Ordering::SeqCst),
        1,
        "ran concurrently with itself"
    );
    // Runs start at 0, 4 and 8 s: the ticks in between were skipped, and firing went on.
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    let status = &scheduler.status()[0];
    assert!(
        matches!(status.last_outcome, Some(JobOutcome::Executed { .. })),
        "{status:?}"
    );
    assert_eq!(
        status.overlapped_ticks, 6,
        "skipped ticks are counted: {status:?}"
    );
    scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn fixed_rate_keeps_firing_after_falling_behind() {
    let starts = Arc::new(Mutex::new(Vec::new()));
    let origin = tokio::time::Instant::now();
    let every_second = Schedule::fixed_rate(Duration::from_secs(1)).unwrap();
    let job = common::sharing("catch_up", every_second, &starts, move |s| async move {
        let at = origin.elapsed().as_millis() as u64;
        s.lock().unwrap().push(at);
        if at == 0 {
            tokio::time::sleep(Duration::from_millis(5_500)).await; // far behind once
        }
    });
    let scheduler = common::start_one(Scheduler::builder(), job).await;
    tokio::time::sleep(Duration::from_millis(12_500)).await;
    scheduler.shutdown().await;
    let starts = starts.lock().unwrap().clone();
    assert_eq!(
        starts,
        [0, 6_000, 7_000, 8_000, 9_000, 10_000, 11_000, 12_000]
    );
}

#[tokio::test(start_paused = true)]
async fn panics_and_errors_are_logged_and_the_next_tick_runs() {
    let store = common::tokio_store();
    let calls = Arc::new(AtomicUsize::new(0));
    let c = Arc::clone(&calls);
    let job = Job::new(
        "flaky",
        Schedule::fixed_rate(Duration::from_secs(1)).unwrap(),
        move |()| {
            let call = c.fetch_add(1, Ordering::SeqCst);
            async move {
                match call {
                    0 => panic!("first run explodes"),
                    1 => Err("second run fails".to_owned()),
                    _ => Ok(()),
                }
            }
        },
    )
    .with_lock(JobLock::new("flaky").unwrap());
    let scheduler =
        common::start_one(Scheduler::builder().provider(store.with_holder("a")), job).await;
    let other = LockingTaskExecutor::new(store.with_holder("b"));
    let lock = LockConfiguration::new("flaky", Duration::from_secs(60), Duration::ZERO).unwrap();

    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        matches!(&scheduler.status()[0].last_outcome, Some(JobOutcome::Panicked(m)) if m == "first run explodes")
    );
    assert!(
        other.try_lock(&lock).await.unwrap().is_some_and(|l| {
            drop(l);
            true
        }),
        "panic kept the lock"
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        scheduler.status()[0].last_outcome,
        Some(JobOutcome::Failed("second run fails".into()))
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(matches!(
        scheduler.status()[0].last_outcome,
        Some(JobOutcome::Executed { .. })
    ));
    assert_eq!(scheduler.status()[0].executions, 3);
    scheduler.shutdown().await;
}

fn long_job(name: &'static str, work: Duration, cooperative: bool) -> Job<()> {
    Job::new(
        name,
        Schedule::fixed_rate(Duration::from_secs(3600)).unwrap(),
        move |()| async move {
            let ctx = LockContext::current().unwrap();
            if cooperative {
                tokio::select! {
                    () = tokio::time::sleep(work) => {}
                    () = ctx.cancelled() => {}
                }
            } else {
                tokio::time::sleep(work).await;
            }
        },
    )
    .with_lock(JobLock::new(name).unwrap())
}

/// Shuts down an instance running `job` (a 5 s grace period, then 2 s after the cancel
/// signal): its report is `(finished, cancelled, aborted, locks_released)`, and a second
/// instance gets the released lock at once.
async fn assert_shutdown(job: Job<()>, report: (usize, usize, usize, usize)) {
    let store = common::tokio_store();
    let config = SchedulerConfig {
        shutdown_grace_period: Duration::from_secs(5),
        shutdown_cancel_period: Duration::from_secs(2),
        ..SchedulerConfig::default()
    };
    let lock = LockConfiguration::new(
        job.lock().unwrap().name(),
        Duration::from_secs(60),
        Duration::ZERO,
    )
    .unwrap();
    let scheduler = common::start_one(
        Scheduler::builder()
            .provider(store.with_holder("a"))
            .config(config),
        job,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(scheduler.status()[0].running);
    let shutdown = scheduler.shutdown().await;
    assert_eq!(
        (
            shutdown.finished,
            shutdown.cancelled,
            shutdown.aborted,
            shutdown.locks_released
        ),
        report
    );
    let free = LockingTaskExecutor::new(store.with_holder("b"))
        .try_lock(&lock)
        .await
        .unwrap()
        .is_some();
    assert!(free, "a second instance must get the released lock at once");
}

/// One test per way a job meets shutdown: `test: job => (finished, cancelled, aborted,
/// locks_released)`.
macro_rules! shutdown_tests {
    ($($test:ident: $job:expr => $report:expr;)*) => {
        $(
            #[tokio::test(start_paused = true)]
            async fn $test() {
                assert_shutdown($job, $report).await;
            }
        )*
    };
}

shutdown_tests! {
    shutdown_waits_for_a_job_that_finishes_within_the_grace_period:
        long_job("finishes", Duration::from_secs(2), false) => (1, 0, 0, 1);
    shutdown_signals_a_long_job_which_stops:
        long_job("cooperates", Duration::from_secs(600), true) => (0, 1, 0, 1);
    shutdown_aborts_a_job_that_ignores_the_signal_and_releases_its_lock:
        long_job("ignores", Duration::from_secs(600), false) => (0, 0, 1, 1);
}

#[tokio::test(start_paused = true)]
async fn keep_alive_holds_the_lock_three_times_past_lock_at_most_for() {
    let store = common::tokio_store();
    let job = Job::new(
        "long",
        Schedule::fixed_rate(Duration::from_secs(3600)).unwrap(),
        |()| async {
            let ctx = LockContext::current().unwrap();
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(30)) => Ok(()),
                () = ctx.cancelled() => Err("lease lost"),
            }
        },
    )
    .with_lock(
        JobLock::new("long")
            .unwrap()
            .lock_at_most_for(Duration::from_secs(10))
            .unwrap()
            .keep_alive(true),
    );
    let scheduler =
        common::start_one(Scheduler::builder().provider(store.with_holder("a")), job).await;
    let other = LockingTaskExecutor::new(store.with_holder("b"));
    let lock = LockConfiguration::new("long", Duration::from_secs(10), Duration::ZERO).unwrap();
    for _ in 0..28 {
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(
            other.try_lock(&lock).await.unwrap().is_none(),
            "lock lost while kept alive"
        );
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(matches!(
        scheduler.status()[0].last_outcome,
        Some(JobOutcome::Executed { .. })
    ));
    scheduler.shutdown().await;
}

/// A manual run (`Job::run_once`, `Scheduler::run_now`) extends the lease like a scheduled one.
#[tokio::test(start_paused = true)]
async fn run_once_keeps_a_keep_alive_job_alive() {
    let store = common::tokio_store();
    let lock = LockConfiguration::new("long", Duration::from_secs(10), Duration::ZERO).unwrap();
    let other = LockingTaskExecutor::new(store.with_holder("b"));
    let job = Job::new("long", Schedule::cron("0 0 3 * * *").unwrap(), move |()| {
        let (other, lock) = (other.clone(), lock.clone());
        async move {
            let ctx = LockContext::current().unwrap();
            for _ in 0..30 {
                tokio::time::sleep(Duration::from_secs(1)).await;
                if other.try_lock(&lock).await.unwrap().is_some() || ctx.is_lost() {
                    return Err("lease lost during a manual run");
                }
            }
            Ok(())
        }
    })
    .with_lock(
        JobLock::new("long")
            .unwrap()
            .lock_at_most_for(Duration::from_secs(10))
            .unwrap(),
    );
    let config = SchedulerConfig {
        keep_alive: true,
        ..SchedulerConfig::default()
    };
    job.validate(&config).unwrap();
    let executor = LockingTaskExecutor::new(store.with_holder("a"));
    let outcome = job.run_once(&executor, &config, ()).await.unwrap();
    assert_eq!(outcome, shedlock_runtime::TaskResult::Executed(Ok(())));

    let too_slow = SchedulerConfig {
        keep_alive_interval: Some(Duration::from_secs(10)),
        ..config
    };
    let err = job.validate(&too_slow).unwrap_err();
    assert!(
        matches!(&err, Error::InvalidConfig { field: "keep_alive_interval", message } if message.contains("job `long`")),
        "{err}"
    );
}

#[tokio::test]
async fn start_rejects_bad_setups_with_clear_errors() {
    let locked = Job::new(
        "locked",
        Schedule::fixed_rate(Duration::from_secs(1)).unwrap(),
        |()| async {},
    )
    .with_lock(JobLock::new("locked").unwrap());
    let no_provider = Scheduler::builder().registry(JobRegistry::new(()).add(locked.clone()));
    let two_alike = Scheduler::builder()
        .provider(InMemoryLockProvider::new())
        .registry(JobRegistry::new(()).add(locked.clone()).add(locked));
    for (builder, message) in [
        (no_provider, "no lock provider"),
        (two_alike, "two jobs are named `locked`"),
    ] {
        let err = builder.start().await.unwrap_err();
        assert!(
            matches!(&err, Error::Scheduler(m) if m.contains(message)),
            "{err}"
        );
    }

    let bad_zone = SchedulerConfig {
        default_zone: "Nowhere/Land".into(),
        ..SchedulerConfig::default()
    };
    let slow_keep_alive = SchedulerConfig {
        keep_alive: true,
        keep_alive_interval: Some(Duration::from_secs(700)),
        ..SchedulerConfig::default()
    };
    for (config, wrong) in [
        (bad_zone, "default_zone"),
        (slow_keep_alive, "keep_alive_interval"),
    ] {
        let err = Scheduler::builder()
            .config(config)
            .start()
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::InvalidConfig { field, .. } if field == wrong),
            "{err}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn status_and_run_now() {
    let job = Job::new(
        "report",
        Schedule::cron("0 0 3 * * *")
            .unwrap()
            .in_zone("Europe/Berlin")
            .unwrap(),
        |()| async {},
    )
    .with_lock(JobLock::new("report").unwrap());
    let store = InMemoryLockProvider::new();
    let scheduler =
        common::start_one(Scheduler::builder().provider(store.with_holder("a")), job).await;
    tokio::task::yield_now().await;
    let status = &scheduler.status()[0];
    assert_eq!(status.schedule, "cron \"0 0 3 * * *\" in Europe/Berlin");
    assert_eq!(status.lock_name.as_deref(), Some("report"));
    assert!(status.next_fire.is_some());
    assert!(scheduler.run_now("report").await.unwrap().was_executed());
    let held = LockingTaskExecutor::new(store.with_holder("b"))
        .try_lock(
            &LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO).unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert!(
        !scheduler.run_now("report").await.unwrap().was_executed(),
        "held elsewhere: skipped"
    );
    held.release().await.unwrap();
    assert!(matches!(
        scheduler.run_now("nope").await,
        Err(Error::Scheduler(_))
    ));
    scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn zoned_cron_fires_at_the_right_wall_clock_time_across_a_dst_change() {
    // 2026-03-29 00:59:58 UTC is 01:59:58 CET, two seconds before Berlin moves to CEST.
    let start = std::time::UNIX_EPOCH + Duration::from_secs(1_774_745_998);
    let clock = Arc::new(TokioClock::starting_at(start));
    let fired_at = Arc::new(Mutex::new(Vec::new()));
    let nine_in_berlin = Schedule::cron("0 0 9 * * *")
        .unwrap()
        .in_zone("Europe/Berlin")
        .unwrap();
    let seen = (Arc::clone(&fired_at), Arc::clone(&clock));
    let job = common::sharing("morning", nine_in_berlin, &seen, |(f, c)| async move {
        f.lock().unwrap().push(shedlock_core::Clock::now(&*c))
    });
    let scheduler = common::start_one(Scheduler::builder().clock(clock.clone()), job).await;
    tokio::time::sleep(Duration::from_secs(7 * 3600)).await;
    scheduler.shutdown().await;
    let fired: Vec<chrono::DateTime<chrono::Utc>> = fired_at
        .lock()
        .unwrap()
        .iter()
        .map(|t| (*t).into())
        .collect();
    // 09:00 CEST = 07:00 UTC; a frozen CET offset would have fired at 08:00 UTC.
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0].to_rfc3339(), "2026-03-29T07:00:00+00:00");
}

#[tokio::test(start_paused = true)]
async fn leader_only_jobs_run_on_the_leader_and_move_on_resign() {
    let store = common::tokio_store();
    let ran_by = Arc::new(Mutex::new(Vec::<(usize, u64)>::new()));
    let origin = tokio::time::Instant::now();
    let mut instances = Vec::new();
    for i in 0..2 {
        let every_second = Schedule::fixed_rate(Duration::from_secs(1)).unwrap();
        let job = common::sharing("batch_work", every_second, &ran_by, move |r| async move {
            r.lock().unwrap().push((i, origin.elapsed().as_secs()))
        })
        .leader_only("batch")
        .unwrap();
        let scheduler = common::start_one(
            Scheduler::builder().provider(store.with_holder(format!("instance-{i}"))),
            job,
        )
        .await;
        instances.push(scheduler);
        tokio::time::sleep(Duration::from_millis(10)).await; // instance 0 campaigns first
    }
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let before: Vec<usize> = ran_by.lock().unwrap().iter().map(|(i, _)| *i).collect();
    assert!(
        before.len() >= 4 && before.iter().all(|&i| i == 0),
        "only the leader runs: {before:?}"
    );
    assert_eq!(
        instances[1].status()[0].last_outcome,
        Some(JobOutcome::NotLeader)
    );

    instances[0].shutdown().await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let after: Vec<usize> = ran_by
        .lock()
        .unwrap()
        .iter()
        .skip(before.len())
        .map(|(i, _)| *i)
        .collect();
    assert!(
        !after.is_empty() && after.iter().all(|&i| i == 1),
        "the new leader takes over: {after:?}"
    );
    instances[1].shutdown().await;
}

/// A whole-process pause, with paused time: the clock jumps while no task runs.
async fn pause(duration: Duration) {
    tokio::time::advance(duration).await;
}

#[tokio::test(start_paused = true)]
async fn after_a_pause_only_the_latest_tick_runs_and_the_others_are_missed() {
    let (journal, instances) = start_instances(1, Duration::ZERO).await;
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert_eq!(journal.runs().len(), 2);
    pause(Duration::from_millis(4_300)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Fire times at 2.5, 3.5, 4.5, 5.5 and 6.5 s passed during the pause: the latest (0.3 s
    // late, nobody ran it) runs, the four before it are missed.
    let status = instances[0].status().remove(0);
    assert_eq!(journal.runs().len(), 3, "{:?}", journal.runs());
    assert_eq!(status.missed_ticks, 4, "{status:?}");
    assert_eq!(status.overlapped_ticks, 0, "{status:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(journal.runs().len(), 5, "the schedule goes on");
    instances[0].shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_tick_later_than_its_misfire_threshold_is_missed() {
    let runs = Arc::new(AtomicUsize::new(0));
    let hourly_within_30_s = Schedule::cron("0 0 * * * *")
        .unwrap()
        .with_misfire_threshold(Duration::from_secs(30))
        .unwrap();
    let job = common::counting("hourly", hourly_within_30_s, &runs);
    // 10 s before the hour.
    let start = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000 - 10);
    let scheduler = common::start_one(
        Scheduler::builder().clock(Arc::new(TokioClock::starting_at(start))),
        job,
    )
    .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    pause(Duration::from_secs(40)).await; // the hour passes during the pause: 35 s late
    tokio::time::sleep(Duration::from_secs(1)).await;
    let status = scheduler.status().remove(0);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    assert_eq!(status.missed_ticks, 1, "{status:?}");
    assert!(
        matches!(status.last_outcome, Some(JobOutcome::Missed { late }) if late >= Duration::from_secs(35)),
        "{status:?}"
    );
    // The next hour runs on time.
    tokio::time::sleep(Duration::from_secs(3_600)).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_short_pause_within_the_threshold_still_runs_the_tick() {
    // A lone instance must not drop its tick after an ordinary hiccup.
    let (journal, instances) = start_instances(1, Duration::from_millis(500)).await;
    tokio::time::sleep(Duration::from_millis(1_000)).await; // ran at 0.5 s
    pause(Duration::from_millis(900)).await; // the tick at 1.5 s is 0.4 s late
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    let status = instances[0].status().remove(0);
    assert_eq!(status.missed_ticks, 0, "{status:?}");
    assert_eq!(journal.runs().len(), 4, "{:?}", journal.runs());
    instances[0].shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn fixed_rate_after_a_pause_runs_the_latest_tick_and_counts_the_rest_missed() {
    let runs = Arc::new(AtomicUsize::new(0));
    let job = common::counting(
        "rate",
        Schedule::fixed_rate(Duration::from_secs(1)).unwrap(),
        &runs,
    );
    let scheduler = common::start_one(Scheduler::builder(), job).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await; // ran at 0 and 1 s
    pause(Duration::from_millis(3_000)).await; // 2, 3 and 4 s pass
    tokio::time::sleep(Duration::from_millis(100)).await;
    let status = scheduler.status().remove(0);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_eq!(status.missed_ticks, 2, "{status:?}");
    scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn after_a_host_suspend_the_wall_clock_says_how_late_a_cron_tick_is() {
    // While a host is suspended its monotonic clock stands still; only the wall clock shows
    // that the 10:00, 11:00 and 12:00 ticks have passed. At 12:30 all three are missed.
    let runs = Arc::new(AtomicUsize::new(0));
    let job = common::counting("hourly", Schedule::cron("0 0 * * * *").unwrap(), &runs);
    let ten = std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
    let wall = Arc::new(shedlock_core::ManualClock::new(
        ten - Duration::from_secs(10),
    ));
    let scheduler = common::start_one(Scheduler::builder().clock(wall.clone()), job).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    wall.advance(Duration::from_secs(2 * 3600 + 30 * 60)); // suspended until 12:30
    tokio::time::sleep(Duration::from_secs(60)).await; // the runner's next look at the clock
    let status = scheduler.status().remove(0);
    assert_eq!(runs.load(Ordering::SeqCst), 0, "{status:?}");
    assert_eq!(status.missed_ticks, 3, "{status:?}");
    scheduler.shutdown().await;
}

/// One leader-only job, `locked` or not, that runs until told to stop (or forever, without a
/// lock context to tell it), on an instance whose store connection the test cuts.
async fn leader_with_a_long_run(locked: bool) -> (Scheduler, Arc<AtomicBool>, Arc<AtomicUsize>) {
    let cut = Arc::new(AtomicBool::new(false));
    let provider = common::Cuttable {
        inner: common::tokio_store().with_holder("leader"),
        cut: Arc::clone(&cut),
    };
    let stopped = Arc::new(AtomicUsize::new(0));
    let every_ten_minutes = Schedule::fixed_rate(Duration::from_secs(600)).unwrap();
    let job = common::sharing(
        "coordinate",
        every_ten_minutes,
        &stopped,
        |told| async move {
            match LockContext::current() {
                Ok(lock) => {
                    lock.cancelled().await;
                    told.fetch_add(1, Ordering::SeqCst);
                }
                Err(_) => std::future::pending().await,
            }
        },
    )
    .leader_only("coordinator")
    .unwrap();
    let job = if locked {
        job.with_lock(JobLock::new("coordinate").unwrap())
    } else {
        job
    };
    let scheduler = common::start_one(Scheduler::builder().provider(provider), job).await;
    (scheduler, cut, stopped)
}

#[tokio::test(start_paused = true)]
async fn a_running_leader_only_job_is_told_when_the_leadership_ends() {
    let (scheduler, cut, told) = leader_with_a_long_run(true).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(scheduler.status()[0].running, "it runs as leader");
    cut.store(true, Ordering::SeqCst); // renewals fail from now on
    let election = scheduler.election("coordinator").unwrap();
    election.candidacy().term_ended().await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(
        told.load(Ordering::SeqCst),
        1,
        "its lock context was cancelled"
    );
    let status = scheduler.status().remove(0);
    assert_eq!(status.last_outcome, Some(JobOutcome::LeadershipLost));
    assert!(!status.running);
    scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_running_leader_only_job_without_a_lock_is_cancelled_when_the_leadership_ends() {
    let (scheduler, cut, _) = leader_with_a_long_run(false).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(scheduler.status()[0].running, "it runs as leader");
    let ended = tokio::time::Instant::now();
    cut.store(true, Ordering::SeqCst);
    let election = scheduler.election("coordinator").unwrap();
    election.candidacy().term_ended().await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    let status = scheduler.status().remove(0);
    assert_eq!(status.last_outcome, Some(JobOutcome::LeadershipLost));
    assert!(!status.running, "cancelled");
    // The default renew deadline (10 s) after the last renewal before the cut.
    assert!(
        ended.elapsed() <= Duration::from_secs(10),
        "{:?}",
        ended.elapsed()
    );
    scheduler.shutdown().await;
}

/// Another runner's late tick (tokio-cron-scheduler polls every 500 ms): an instance asking
/// for a cron tick that another instance already ran is refused, even with no
/// `lock_at_least_for` and the lock long released; a manual run is not affected.
#[tokio::test]
async fn a_tick_run_elsewhere_is_not_run_again_by_a_late_runner() {
    let store = InMemoryLockProvider::new();
    let (a, b) = (
        LockingTaskExecutor::new(store.with_holder("a")),
        LockingTaskExecutor::new(store.with_holder("b")),
    );
    let job = Job::new(
        "tick",
        Schedule::cron("* * * * * *").unwrap(),
        |_: ()| async { Ok::<(), Error>(()) },
    )
    .with_lock(
        JobLock::new("tick")
            .unwrap()
            .lock_at_least_for(Duration::ZERO)
            .unwrap(),
    );
    let config = SchedulerConfig::default();
    loop {
        let second = chrono::Utc::now().timestamp();
        let first = job.run_latest_tick(&a, &config, ()).await.unwrap();
        let again = job.run_latest_tick(&b, &config, ()).await.unwrap();
        if chrono::Utc::now().timestamp() != second {
            continue; // the two runs straddled a fire time: they were for different ticks
        }
        assert!(first.into_executed().is_some(), "the tick's first run");
        assert!(
            again.into_executed().is_none(),
            "the same tick run again by another instance"
        );
        break;
    }
    let manual = job.run_once(&b, &config, ()).await.unwrap();
    assert!(
        manual.into_executed().is_some(),
        "run_once is not tied to a tick"
    );
}

/// A store that counts how the scheduler asks for locks: one at a time, or in batches.
#[derive(Debug, Clone)]
struct CountingAsks {
    inner: InMemoryLockProvider,
    singles: Arc<AtomicUsize>,
    batches: Arc<Mutex<Vec<usize>>>,
}

#[shedlock_core::async_trait]
impl shedlock_core::LockProvider for CountingAsks {
    async fn acquire(
        &self,
        config: &LockConfiguration,
    ) -> Result<Option<shedlock_core::LockLease>, Error> {
        self.singles.fetch_add(1, Ordering::SeqCst);
        self.inner.acquire(config).await
    }
    async fn acquire_many(
        &self,
        configs: &[LockConfiguration],
    ) -> Vec<Result<Option<shedlock_core::LockLease>, Error>> {
        self.batches.lock().unwrap().push(configs.len());
        let mut answers = Vec::new();
        for config in configs {
            answers.push(self.inner.acquire(config).await);
        }
        answers
    }
    async fn release(&self, lease: &shedlock_core::LockLease) -> Result<bool, Error> {
        self.inner.release(lease).await
    }
    async fn extend(
        &self,
        lease: &shedlock_core::LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<shedlock_core::LockLease>, Error> {
        self.inner
            .extend(lease, lock_at_most_for, lock_at_least_for)
            .await
    }
    fn holder(&self) -> &str {
        self.inner.holder()
    }
}

/// Runs by job name and tick.
type TickRuns = Arc<Mutex<Vec<(String, Option<std::time::SystemTime>)>>>;

/// Fifty jobs due at the same instants ask for their locks together: one batch of 50 per
/// tick, on each of two instances, and every tick of every job runs once.
#[tokio::test(start_paused = true)]
async fn jobs_due_together_claim_their_locks_in_one_batch() {
    let store = common::tokio_store();
    let runs: TickRuns = Arc::default();
    let mut instances = Vec::new();
    let mut counters = Vec::new();
    for instance in 0..2 {
        let asks = CountingAsks {
            inner: store.with_holder(format!("instance-{instance}")),
            singles: Arc::default(),
            batches: Arc::default(),
        };
        counters.push(asks.clone());
        let mut registry = JobRegistry::new(Arc::clone(&runs));
        for i in 0..50 {
            let name = format!("job-{i:02}");
            let job = Job::new(
                name.clone(),
                Schedule::cron("* * * * * *").unwrap(),
                move |runs: TickRuns| {
                    let name = name.clone();
                    async move {
                        let tick = RunContext::current().and_then(|run| run.tick());
                        runs.lock().unwrap().push((name, tick));
                    }
                },
            )
            .with_lock(JobLock::new(format!("batch-{i:02}")).unwrap());
            registry = registry.add(job);
        }
        let scheduler = Scheduler::builder()
            .provider(asks)
            .clock(Arc::new(TokioClock::new()))
            .registry(registry)
            .start()
            .await
            .unwrap();
        instances.push(scheduler);
    }
    tokio::time::sleep(Duration::from_millis(4_500)).await;
    for instance in &instances {
        instance.shutdown().await;
    }
    for asks in &counters {
        let batches = asks.batches.lock().unwrap().clone();
        assert!(batches.len() >= 4, "one batch per tick: {batches:?}");
        assert!(batches.iter().all(|&size| size == 50), "{batches:?}");
        assert_eq!(asks.singles.load(Ordering::SeqCst), 0, "single asks");
    }
    let mut runs = runs.lock().unwrap().clone();
    let all = runs.len();
    runs.sort();
    runs.dedup();
    assert_eq!(runs.len(), all, "a job ran a tick twice");
    assert!(all >= 4 * 50, "{all} runs");
}
