//! Three schedulers on one SQLite file, a job every second, in real time: every tick runs
//! exactly once across the three, and `lock_at_least_for` keeps a microsecond job from running
//! again on an instance whose trigger fires a moment later.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::Db;
use shedlock::{Job, JobLock, JobRegistry, LockContext, Schedule, Scheduler};

#[derive(Debug, Clone)]
struct Run {
    holder: String,
    token: u64,
    start: Duration,
    end: Duration,
}

fn since_epoch() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_schedulers_on_one_sqlite_file_run_each_tick_once() {
    let first = common::provider(Db::Sqlite, "instance-0")
        .await
        .expect("SQLite needs no server");
    let runs: Arc<Mutex<Vec<Run>>> = Arc::default();
    let job = {
        let runs = Arc::clone(&runs);
        Job::new(
            "every_second",
            Schedule::cron("* * * * * *").unwrap(),
            move |()| {
                let runs = Arc::clone(&runs);
                async move {
                    let ctx = LockContext::current().unwrap();
                    let start = since_epoch();
                    tokio::task::yield_now().await; // a job that takes microseconds
                    runs.lock().unwrap().push(Run {
                        holder: ctx.holder(),
                        token: ctx.fencing_token(),
                        start,
                        end: since_epoch(),
                    });
                }
            },
        )
        .with_lock(
            JobLock::new("every_second")
                .unwrap()
                .lock_at_most_for(Duration::from_secs(10))
                .unwrap()
                .lock_at_least_for(Duration::from_millis(500))
                .unwrap(),
        )
    };
    let mut schedulers = Vec::new();
    for i in 0..3 {
        let provider = if i == 0 {
            first.clone()
        } else {
            common::another_instance(&first, &format!("instance-{i}")).await
        };
        let scheduler = Scheduler::builder()
            .shared_provider(provider.shared())
            .registry(JobRegistry::new(()).add(job.clone()))
            .start()
            .await
            .unwrap();
        schedulers.push(scheduler);
    }
    tokio::time::sleep(Duration::from_millis(7_300)).await;
    for scheduler in &schedulers {
        scheduler.shutdown().await;
    }

    let runs = runs.lock().unwrap().clone();
    let seconds: Vec<u64> = runs.iter().map(|r| r.start.as_secs()).collect();
    assert!(runs.len() >= 6, "too few runs: {runs:?}");
    assert!(
        seconds.windows(2).all(|w| w[0] < w[1]),
        "a tick ran twice or out of order: {runs:?}"
    );
    assert!(
        runs.windows(2).all(|w| w[0].token < w[1].token),
        "tokens must increase: {runs:?}"
    );
    assert!(
        runs.windows(2).all(|w| w[0].end <= w[1].start),
        "runs overlapped: {runs:?}"
    );
    assert!(
        runs.iter().all(|r| r.start.subsec_millis() < 500),
        "ticks must fire on the second: {runs:?}"
    );
    let skips: u64 = schedulers.iter().map(|s| s.status()[0].skips).sum();
    assert!(
        skips >= 2 * (runs.len() as u64 - 1),
        "the other two skip each tick: {skips} skips, {runs:?}"
    );
    let holders: std::collections::HashSet<&str> = runs.iter().map(|r| r.holder.as_str()).collect();
    println!("{} runs by {holders:?}", runs.len());
    first.remove_store().await;
}
