//! Three schedulers on one SQLite file, a job every second, in real time: no tick runs twice
//! across the three (a microsecond job, so `lock_at_least_for` and the tick window are what
//! keep an instance whose trigger fires a moment later from running it again), and every
//! instance accounts for every tick: it ran it, skipped it (held elsewhere), or reported it
//! missed. What it asserts holds on a loaded machine; that ticks fire on the whole second is
//! checked with paused time in `shedlock-core`.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Db, Run, since_epoch};
use shedlock::{Job, JobLock, JobRegistry, LockContext, Schedule, Scheduler};

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
                    let run = Run::of_a_microsecond_job(&ctx).await;
                    runs.lock().unwrap().push(run);
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
    let started = since_epoch();
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
    let stopping = since_epoch();
    for scheduler in &schedulers {
        scheduler.shutdown().await;
    }

    let runs = runs.lock().unwrap().clone();
    let seconds: Vec<u64> = runs.iter().map(|r| r.start.as_secs()).collect();
    assert!(!runs.is_empty(), "nothing ran");
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
    // Fire times between the first start and the shutdown: each instance ran, skipped, missed
    // or failed to acquire each of them (one more or less at either end, as the instances start one by one).
    let fired = stopping.as_secs() - started.as_secs();
    for scheduler in &schedulers {
        let s = &scheduler.status()[0];
        let accounted =
            s.executions + s.skips + s.missed_ticks + s.overlapped_ticks + s.store_errors;
        assert!(
            accounted.abs_diff(fired) <= 1,
            "{fired} fire times, {accounted} accounted for: {s:?}"
        );
    }
    let holders: std::collections::HashSet<&str> = runs.iter().map(|r| r.holder.as_str()).collect();
    println!("{} runs by {holders:?}", runs.len());
    first.remove_store().await;
}
