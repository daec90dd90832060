//! shedlock jobs on tokio-cron-scheduler's own `JobScheduler`, against real databases (SQLite
//! always; PostgreSQL and MariaDB when their URLs are set; each test removes what it created):
//! three schedulers run each tick of a per-second job once; a slow run's overlapping ticks are
//! skipped, not run beside it; keep-alive and the lost-lock signal reach the job; store errors
//! and panics leave the scheduler ticking.
//!
//! Nothing here asserts that the machine is fast: ticks may come late or be missed under load.
//! What is asserted is what the lock guarantees: no tick runs twice, no runs overlap.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use common::{Db, Run};
use shedlock::tokio_cron::{IntoTokioCronJob, locked_job};
use shedlock::{
    LockConfiguration, LockContext, LockEvent, LockingTaskExecutor, SchedulerConfig, scheduled,
    scheduler_lock,
};
use tokio::sync::{mpsc, watch};
use tokio_cron_scheduler::JobScheduler;

/// The longest a test waits for something it expects: generous, since a loaded machine is slow,
/// not wrong.
const PATIENCE: Duration = Duration::from_secs(60);

async fn within<T>(what: &str, future: impl Future<Output = Option<T>>) -> T {
    tokio::time::timeout(PATIENCE, future)
        .await
        .unwrap_or_else(|_| panic!("waited {PATIENCE:?} for {what}"))
        .unwrap_or_else(|| panic!("channel closed while waiting for {what}"))
}

/// An executor over `provider` that reports each event `wanted` picks out on a channel.
fn executor_reporting(
    provider: &common::Provider,
    wanted: fn(&LockEvent<'_>) -> bool,
) -> (LockingTaskExecutor, mpsc::UnboundedReceiver<()>) {
    let (events, received) = mpsc::unbounded_channel();
    let executor = LockingTaskExecutor::from_shared(provider.shared()).with_listener(
        move |event: &LockEvent<'_>| {
            if wanted(event) {
                let _ = events.send(());
            }
        },
    );
    (executor, received)
}

fn skipped(event: &LockEvent<'_>) -> bool {
    matches!(event, LockEvent::Skipped { .. })
}

#[derive(Clone)]
struct Journal {
    runs: mpsc::UnboundedSender<Run>,
}

/// No `lock_at_least_for`: the three schedulers fire the same tick up to ½ s apart
/// (tokio-cron-scheduler checks for due jobs every 500 ms, more under load), and each run asks
/// for the lock of its tick, refused where another instance took it since the fire time.
#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(name = "tcs_every_second", lock_at_most_for = "10s")]
async fn every_second(journal: Journal, lock: LockContext) {
    let _ = journal.runs.send(Run::of_a_microsecond_job(&lock).await);
}

async fn three_schedulers_run_each_tick_once(db: Db) {
    let Some(first) = common::provider(db, "instance-0").await else {
        return;
    };
    let (runs, mut received) = mpsc::unbounded_channel();
    let journal = Journal { runs };
    let mut schedulers = Vec::new();
    let mut skip_counts = Vec::new();
    for i in 0..3 {
        let provider = match i {
            0 => first.clone(),
            _ => common::another_instance(&first, &format!("instance-{i}")).await,
        };
        let (executor, skips) = executor_reporting(&provider, skipped);
        let job = shedlock::job!(every_second)
            .into_tokio_cron_job(&executor, &SchedulerConfig::default(), journal.clone())
            .unwrap();
        let scheduler = JobScheduler::new().await.unwrap();
        scheduler.add(job).await.unwrap();
        schedulers.push(scheduler);
        skip_counts.push(skips);
    }
    for scheduler in &schedulers {
        scheduler.start().await.unwrap();
    }
    let mut runs = Vec::new();
    while runs.len() < 6 {
        runs.push(within("six runs", received.recv()).await);
    }
    for scheduler in &mut schedulers {
        scheduler.shutdown().await.unwrap();
    }
    first.remove_store().await;

    runs.sort_by_key(|run| run.start);
    let mut per_tick: BTreeMap<u64, usize> = BTreeMap::new();
    for run in &runs {
        *per_tick.entry(run.start.as_secs()).or_default() += 1;
    }
    assert!(
        per_tick.values().all(|&count| count == 1),
        "{db:?}: a tick ran more than once: {per_tick:?}\n{runs:#?}"
    );
    assert!(
        runs.windows(2).all(|w| w[0].end <= w[1].start),
        "{db:?}: runs overlapped: {runs:#?}"
    );
    assert!(
        runs.windows(2).all(|w| w[0].token < w[1].token),
        "{db:?}: fencing tokens must increase: {runs:#?}"
    );
    let (first_tick, last_tick) = (
        runs[0].start.as_secs(),
        runs[runs.len() - 1].start.as_secs(),
    );
    let ticks = last_tick - first_tick + 1;
    assert!(
        2 * runs.len() as u64 >= ticks,
        "{db:?}: ran on {} of {ticks} ticks: {runs:#?}",
        runs.len()
    );
    let holders: BTreeSet<&str> = runs.iter().map(|run| run.holder.as_str()).collect();
    let skips: usize = skip_counts.iter_mut().map(drain).sum();
    eprintln!(
        "{db:?}: {} runs on {ticks} ticks by {holders:?}, {skips} skipped ticks",
        runs.len()
    );
}

fn drain(events: &mut mpsc::UnboundedReceiver<()>) -> usize {
    std::iter::from_fn(|| events.try_recv().ok()).count()
}

/// tokio-cron-scheduler starts a new task on every tick even while the previous run goes on
/// (its #83); under the lock, those ticks are skipped (held by this very instance).
async fn a_slow_runs_overlapping_ticks_are_skipped(db: Db) {
    let Some(provider) = common::provider(db, "slow-instance").await else {
        return;
    };
    let (executor, mut skips) = executor_reporting(&provider, skipped);
    let (started, mut runs) = mpsc::unbounded_channel();
    let (finish, may_finish) = watch::channel(false);
    let running = Arc::new(AtomicUsize::new(0));
    let most_at_once = Arc::new(AtomicUsize::new(0));
    let lock =
        LockConfiguration::new("tcs_slow", Duration::from_secs(300), Duration::ZERO).unwrap();
    let job = {
        let (running, most_at_once) = (Arc::clone(&running), Arc::clone(&most_at_once));
        locked_job("* * * * * *", &executor, lock, move || {
            let (running, most_at_once) = (Arc::clone(&running), Arc::clone(&most_at_once));
            let (started, mut may_finish) = (started.clone(), may_finish.clone());
            async move {
                let now_running = running.fetch_add(1, Ordering::SeqCst) + 1;
                most_at_once.fetch_max(now_running, Ordering::SeqCst);
                let _ = started.send(LockContext::current().unwrap().fencing_token());
                // Slow: runs until the test lets it finish, while ticks keep coming.
                let _ = may_finish.wait_for(|&finish| finish).await;
                running.fetch_sub(1, Ordering::SeqCst);
            }
        })
        .unwrap()
    };
    let mut scheduler = JobScheduler::new().await.unwrap();
    scheduler.add(job).await.unwrap();
    scheduler.start().await.unwrap();

    let first_token = within("the first run", runs.recv()).await;
    within("an overlapping tick", skips.recv()).await;
    within("a second overlapping tick", skips.recv()).await;
    assert!(
        runs.try_recv().is_err(),
        "{db:?}: a tick ran while the previous run was still going"
    );
    finish.send(true).unwrap();
    let next_token = within("a run after the slow one", runs.recv()).await;
    scheduler.shutdown().await.unwrap();
    provider.remove_store().await;

    assert!(next_token > first_token, "{db:?}");
    assert_eq!(
        most_at_once.load(Ordering::SeqCst),
        1,
        "{db:?}: runs overlapped"
    );
}

#[derive(Clone)]
struct Probe {
    started: mpsc::UnboundedSender<u64>,
    signalled: mpsc::UnboundedSender<bool>,
}

#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(
    name = "tcs_kept_alive",
    lock_at_most_for = "1500ms",
    keep_alive = true
)]
async fn kept_alive(probe: Probe, lock: LockContext) {
    let _ = probe.started.send(lock.fencing_token());
    lock.cancelled().await;
    let _ = probe.signalled.send(lock.is_lost());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keep_alive_and_the_lost_lock_signal_reach_the_job() {
    const LEASE: Duration = Duration::from_millis(1_500);
    let provider = common::provider(Db::Sqlite, "holder")
        .await
        .expect("SQLite needs no server");
    let other = common::another_instance(&provider, "other").await;
    let other = LockingTaskExecutor::from_shared(other.shared());
    let executor = LockingTaskExecutor::from_shared(provider.shared());
    let (started, mut runs) = mpsc::unbounded_channel();
    let (signalled, mut signals) = mpsc::unbounded_channel();
    let job = shedlock::job!(kept_alive)
        .into_tokio_cron_job(
            &executor,
            &SchedulerConfig::default(),
            Probe { started, signalled },
        )
        .unwrap();
    let mut scheduler = JobScheduler::new().await.unwrap();
    scheduler.add(job).await.unwrap();
    scheduler.start().await.unwrap();
    within("the run", runs.recv()).await;

    // Three leases long, sampled: kept alive, the lock never comes free.
    let lock = LockConfiguration::new("tcs_kept_alive", LEASE, Duration::ZERO).unwrap();
    let until = tokio::time::Instant::now() + 3 * LEASE;
    while tokio::time::Instant::now() < until {
        assert!(
            other.try_lock(&lock).await.unwrap().is_none(),
            "the lease ran out although kept alive"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(signals.try_recv().is_err(), "signalled while kept alive");

    let taken = provider.steal(&lock, &other).await;
    assert!(
        within("the lost-lock signal", signals.recv()).await,
        "signalled, but not as lost"
    );
    scheduler.shutdown().await.unwrap();
    taken.release().await.unwrap();
    provider.remove_store().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_panics_errors_and_store_errors_leave_the_scheduler_ticking() {
    let provider = common::provider(Db::Sqlite, "instance")
        .await
        .expect("SQLite needs no server");
    let (executor, mut store_errors) = executor_reporting(&provider, |event| {
        matches!(event, LockEvent::AcquireFailed { .. })
    });
    let (ran, mut runs) = mpsc::unbounded_channel();
    let calls = Arc::new(AtomicUsize::new(0));
    // Longer than the test's patience: a run after the panic proves the lock was released.
    let lock = LockConfiguration::new("tcs_failing", 2 * PATIENCE, Duration::ZERO).unwrap();
    let job = locked_job("* * * * * *", &executor, lock, move || {
        let (calls, ran) = (Arc::clone(&calls), ran.clone());
        async move {
            let call = calls.fetch_add(1, Ordering::SeqCst);
            let _ = ran.send(call);
            match call {
                0 => panic!("the first run panics"),
                1 => Err("the second run fails"),
                _ => Ok(()),
            }
        }
    })
    .unwrap();
    let mut scheduler = JobScheduler::new().await.unwrap();
    scheduler.add(job).await.unwrap();
    scheduler.start().await.unwrap();

    assert_eq!(within("the panicking run", runs.recv()).await, 0);
    assert_eq!(within("the failing run", runs.recv()).await, 1);
    assert_eq!(within("a good run", runs.recv()).await, 2);
    provider.close().await;
    within("a tick failing on the store", store_errors.recv()).await;
    within("the next tick, failing again", store_errors.recv()).await;
    scheduler.shutdown().await.unwrap();
    provider.remove_store().await;
}

sql_tests!(
    three_schedulers_run_each_tick_once,
    a_slow_runs_overlapping_ticks_are_skipped,
);
