//! What the scheduler decides at the moment a run starts: nothing starts once shutdown has
//! begun (on every path), a leader-only job does not start once the leadership has ended, and
//! a job's closure does no work before its lock is taken. Paused clock throughout.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Slow;
use shedlock_core::{Error, LockConfiguration};
use shedlock_runtime::{
    Job, JobLock, JobOutcome, JobRegistry, LockContext, LockingTaskExecutor, Schedule, Scheduler,
    SchedulerConfig, TaskResult,
};

use common::{counting, start_one, tokio_store as store};

async fn start(provider: Slow, jobs: Vec<Job<()>>) -> Scheduler {
    let registry = jobs
        .into_iter()
        .fold(JobRegistry::new(()), JobRegistry::add);
    Scheduler::builder()
        .provider(provider)
        .registry(registry)
        .start()
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn ticks_due_when_shutdown_begins_do_not_start() {
    let runs = Arc::new(AtomicUsize::new(0));
    // Every first tick is due at once; shutdown is asked before any job loop has run. Fixed
    // delay runs its first tick without waiting; fixed rate's wait is over at once too, so an
    // unbiased choice between it and the shutdown signal would start each of the twenty with
    // even odds.
    let mut jobs = vec![counting(
        "fixed_delay",
        Schedule::fixed_delay(Duration::from_secs(60)).unwrap(),
        &runs,
    )];
    for i in 0..20 {
        let schedule = Schedule::fixed_rate(Duration::from_secs(60)).unwrap();
        jobs.push(
            counting(&format!("fixed_rate_{i}"), schedule, &runs)
                .with_lock(JobLock::new(format!("rate_{i}")).unwrap()),
        );
    }
    let scheduler = start(Slow::new(store()), jobs).await;
    let report = scheduler.shutdown().await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "a run started after shutdown began"
    );
    assert_eq!(report.finished + report.cancelled + report.aborted, 0);
    assert!(
        scheduler
            .status()
            .iter()
            .all(|job| job.last_outcome.is_none())
    );
}

#[tokio::test(start_paused = true)]
async fn a_run_whose_lock_arrives_after_shutdown_began_does_not_start() {
    let store = store();
    let slow = Slow::new(store.with_holder("a")).acquiring_for(Duration::from_secs(1));
    let acquiring = Arc::clone(&slow.acquiring);
    let runs = Arc::new(AtomicUsize::new(0));
    let job = counting("cron", Schedule::cron("* * * * * *").unwrap(), &runs).with_lock(
        JobLock::new("cron")
            .unwrap()
            .lock_at_least_for(Duration::from_secs(30))
            .unwrap(),
    );
    let scheduler = start(slow, vec![job]).await;
    acquiring.notified().await; // the tick fired; its lock request is on its way
    scheduler.shutdown().await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "started after shutdown began"
    );
    // Nothing ran, so nothing for lock_at_least_for to protect: the lock is free at once.
    let lock = LockConfiguration::new("cron", Duration::from_secs(60), Duration::ZERO).unwrap();
    assert!(
        LockingTaskExecutor::new(store.with_holder("b"))
            .try_lock(&lock)
            .await
            .unwrap()
            .is_some()
    );
}

#[tokio::test(start_paused = true)]
async fn run_now_does_not_start_once_shutdown_began() {
    let slow = Slow::new(store()).acquiring_for(Duration::from_secs(1));
    let acquiring = Arc::clone(&slow.acquiring);
    let runs = Arc::new(AtomicUsize::new(0));
    let hourly = || Schedule::cron("0 0 * * * *").unwrap();
    let locked = counting("locked", hourly(), &runs).with_lock(JobLock::new("locked").unwrap());
    let scheduler = start(slow, vec![locked, counting("unlocked", hourly(), &runs)]).await;

    // Shutdown begins while run_now waits for the lock.
    let (during, _) = tokio::join!(scheduler.run_now("locked"), async {
        acquiring.notified().await;
        scheduler.shutdown().await
    });
    assert!(matches!(during, Err(Error::Scheduler(_))), "{during:?}");
    for job in ["locked", "unlocked"] {
        let after = scheduler.run_now(job).await;
        assert!(
            matches!(&after, Err(Error::Scheduler(m)) if m.contains("shutting down")),
            "{after:?}"
        );
    }
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_leader_only_job_does_not_start_once_the_leadership_ended() {
    let slow = Slow::new(store()).acquiring_for(Duration::from_secs(1));
    let acquiring = Arc::clone(&slow.acquiring);
    let runs = Arc::new(AtomicUsize::new(0));
    let job = counting(
        "batch",
        Schedule::fixed_rate(Duration::from_secs(60)).unwrap(),
        &runs,
    )
    .with_lock(JobLock::new("batch").unwrap())
    .leader_only("coordinator")
    .unwrap();
    let scheduler = start_one(
        Scheduler::builder()
            .provider(slow)
            .elector(store().with_holder("a")),
        job,
    )
    .await;
    let election = scheduler.election("coordinator").unwrap();
    election
        .subscribe()
        .wait_for(|state| *state != shedlock_core::LeaderState::Follower)
        .await
        .unwrap();
    acquiring.notified().await; // leading when the tick fired; the lock is on its way
    election.resign().await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "started after the leadership ended"
    );
    assert_eq!(
        scheduler.status()[0].last_outcome,
        Some(JobOutcome::NotLeader)
    );
    scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_jobs_closure_does_no_work_when_the_lock_is_held_elsewhere() {
    let store = store();
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    // The closure works before it returns its future (as a non-async closure may).
    let job = Job::new("eager", Schedule::cron("0 0 * * * *").unwrap(), move |()| {
        seen.fetch_add(1, Ordering::SeqCst);
        async {}
    })
    .with_lock(JobLock::new("eager").unwrap());
    let scheduler = start(Slow::new(store.with_holder("a")), vec![job.clone()]).await;
    let lock = LockConfiguration::new("eager", Duration::from_secs(60), Duration::ZERO).unwrap();
    let held = LockingTaskExecutor::new(store.with_holder("b"))
        .try_lock(&lock)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        scheduler.run_now("eager").await.unwrap(),
        TaskResult::Skipped
    );
    let executor = LockingTaskExecutor::new(store.with_holder("c"));
    let once = job
        .run_once(&executor, &SchedulerConfig::default(), ())
        .await;
    assert_eq!(once.unwrap(), TaskResult::Skipped);
    assert_eq!(calls.load(Ordering::SeqCst), 0, "worked without the lock");
    held.release().await.unwrap();
    assert!(scheduler.run_now("eager").await.unwrap().was_executed());
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn keep_alive_goes_on_while_a_job_asked_to_stop_winds_down() {
    let store = store();
    let lost = Arc::new(Mutex::new(None));
    let (seen, stopping) = (Arc::clone(&lost), Arc::new(AtomicBool::new(false)));
    let asked = Arc::clone(&stopping);
    let job = Job::new(
        "long",
        Schedule::fixed_rate(Duration::from_secs(3600)).unwrap(),
        move |()| {
            let (seen, asked) = (Arc::clone(&seen), Arc::clone(&asked));
            async move {
                let ctx = LockContext::current().unwrap();
                ctx.cancelled().await;
                asked.store(true, Ordering::SeqCst);
                // Cleanup that takes longer than the lease.
                tokio::time::sleep(Duration::from_secs(10)).await;
                *seen.lock().unwrap() = Some(ctx.is_lost());
            }
        },
    )
    .with_lock(
        JobLock::new("long")
            .unwrap()
            .lock_at_most_for(Duration::from_secs(3))
            .unwrap()
            .keep_alive(true),
    );
    let config = SchedulerConfig {
        keep_alive_interval: Some(Duration::from_secs(1)),
        shutdown_grace_period: Duration::from_secs(1),
        shutdown_cancel_period: Duration::from_secs(30),
        ..SchedulerConfig::default()
    };
    let scheduler = start_one(
        Scheduler::builder()
            .provider(store.with_holder("a"))
            .config(config),
        job,
    )
    .await;
    tokio::task::yield_now().await;
    let rival = LockingTaskExecutor::new(store.with_holder("b"));
    let lock = LockConfiguration::new("long", Duration::from_secs(3), Duration::ZERO).unwrap();
    let (report, taken) = tokio::join!(scheduler.shutdown(), async {
        while !stopping.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // Well past the lease the job held when it was asked to stop.
        tokio::time::sleep(Duration::from_secs(8)).await;
        rival.try_lock(&lock).await.unwrap().is_some()
    });
    assert!(!taken, "the lock lapsed while its job still ran");
    assert_eq!(
        *lost.lock().unwrap(),
        Some(false),
        "the job's lease was lost"
    );
    assert_eq!(report.cancelled, 1);
}
