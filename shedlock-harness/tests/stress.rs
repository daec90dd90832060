//! The bounded stress run CI affords: 3 worker processes × 10 locks × 8 s of 1 s ticks on each
//! database (Redis and RedLock too); every tick of every lock must run exactly once, with no
//! overlap and no stale write.
//! The long run is `cargo run --release -p shedlock-harness -- stress --db postgres
//! --processes 8 --locks 100 --seconds 60 --tick 2 --job-ms 1000` (see docs/RELIABILITY.md).

mod common;

use std::path::Path;

use shedlock_harness::{Backend, StressOptions, database_url, run_stress};

use common::{EXE, assert_passed};

async fn bounded_stress(backend: Backend) {
    let Some(url) = database_url(backend) else {
        return;
    };
    let options = StressOptions::new(backend, url);
    let report = run_stress(Path::new(EXE), &options)
        .await
        .expect("the run completes");
    println!("{options}\n{report}");
    assert_passed(&report);
    let ticks = options.locks * options.window.as_secs() as usize;
    assert_eq!(report.ticks_checked, ticks, "{report}");
    assert_eq!(
        report.journal_rows as u64, report.counts.acquired,
        "{report}"
    );
    assert_eq!(
        report.counts.attempts,
        report.counts.acquired + report.counts.skipped,
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_bounded_stress() {
    bounded_stress(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_bounded_stress() {
    bounded_stress(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_bounded_stress() {
    bounded_stress(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_bounded_stress() {
    bounded_stress(Backend::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_bounded_stress() {
    bounded_stress(Backend::RedLock).await;
}
