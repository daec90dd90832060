//! Catch-up after a fleet-wide outage on every store, in real time: two instances start one
//! after the other with a cron job (every 10 s) that catches up a tick missed by at most a
//! minute. The first runs the latest fire time at start (nobody ran it: the fleet was down);
//! the second, starting a moment later, must not run it again (the store says the lock was
//! taken since that fire time). Each tick runs at most once; the caught-up one exactly once,
//! and `RunContext` names it. SQLite always; the servers with their test URLs (skipped
//! without, failed without under `CI=true`). DST and the bound are checked in paused time in
//! `shedlock-core/tests/recovery.rs`.

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use common::Db;
use shedlock::{
    Job, JobLock, JobRegistry, LockContext, LockProvider, RunContext, Schedule, Scheduler,
    etcd::EtcdLockProvider, redis::RedisLockProvider, zookeeper::ZkLockProvider,
};
use shedlock_conformance::unique_key_prefix;
use shedlock_test_support::{etcd_url, redis_url, unique_zk_root, zk_url};

/// (tick, holder) of every run.
type Runs = Arc<Mutex<Vec<(Option<SystemTime>, String)>>>;

fn job(runs: &Runs) -> Job<()> {
    let runs = Arc::clone(runs);
    Job::new(
        "catch_up",
        Schedule::cron("*/10 * * * * *")
            .unwrap()
            .with_catch_up(Duration::from_secs(60))
            .unwrap(),
        move |()| {
            let runs = Arc::clone(&runs);
            async move {
                let run = RunContext::current().expect("a scheduled run");
                let lock = LockContext::current().expect("a locked run");
                runs.lock().unwrap().push((run.tick(), lock.holder()));
            }
        },
    )
    .with_lock(
        JobLock::new("catch_up")
            .unwrap()
            .lock_at_most_for(Duration::from_secs(30))
            .unwrap(),
    )
}

async fn start(provider: Arc<dyn LockProvider>, job: &Job<()>) -> Scheduler {
    Scheduler::builder()
        .shared_provider(provider)
        .registry(JobRegistry::new(()).add(job.clone()))
        .start()
        .await
        .expect("start the scheduler")
}

/// The two instances on `a` and `b` (one store, two holders).
async fn caught_up_once(a: Arc<dyn LockProvider>, b: Arc<dyn LockProvider>) {
    let runs: Runs = Arc::default();
    let job = job(&runs);
    let first = start(a, &job).await;
    // The first instance's catch-up is under way or done; the second starts a moment later.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = start(b, &job).await;
    tokio::time::sleep(Duration::from_millis(1500)).await;
    first.shutdown().await;
    second.shutdown().await;

    let runs = runs.lock().unwrap().clone();
    let mut per_tick: HashMap<Option<SystemTime>, usize> = HashMap::new();
    for (tick, _) in &runs {
        *per_tick.entry(*tick).or_default() += 1;
    }
    assert!(
        per_tick.values().all(|&n| n == 1),
        "a tick ran twice: {runs:?}"
    );
    let caught_up = runs.first().expect("the missed tick was caught up");
    let tick = caught_up.0.expect("a scheduled tick");
    let ago = SystemTime::now().duration_since(tick).unwrap();
    assert!(
        ago <= Duration::from_secs(12),
        "the latest fire time: {runs:?}"
    );
}

async fn catches_up_a_missed_tick_once(db: Db) {
    let Some(first) = common::provider(db, "instance-a").await else {
        return;
    };
    let second = first.with_holder("instance-b");
    caught_up_once(first.shared(), second.shared()).await;
    first.remove_store().await;
}

sql_tests!(catches_up_a_missed_tick_once);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_catches_up_a_missed_tick_once() {
    let Some(url) = redis_url() else { return };
    let provider = RedisLockProvider::builder()
        .key_prefix(unique_key_prefix("catch-up"))
        .connect(&url)
        .await
        .unwrap();
    let b = Arc::new(provider.with_holder("instance-b").unwrap());
    caught_up_once(Arc::new(provider), b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zookeeper_catches_up_a_missed_tick_once() {
    let Some(url) = zk_url() else { return };
    let provider = ZkLockProvider::builder(&url)
        .root(unique_zk_root("catch-up"))
        .connect()
        .await
        .unwrap();
    provider.create_schema().await.unwrap();
    let b = Arc::new(provider.with_holder("instance-b").unwrap());
    caught_up_once(Arc::new(provider), b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_catches_up_a_missed_tick_once() {
    let Some(url) = etcd_url() else { return };
    let prefix = format!("{}/", unique_key_prefix("catch-up").trim_end_matches(':'));
    let provider = EtcdLockProvider::builder(&url)
        .prefix(prefix)
        .connect()
        .await
        .unwrap();
    let b = Arc::new(provider.with_holder("instance-b").unwrap());
    caught_up_once(Arc::new(provider), b).await;
}
