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
    // Every acquisition ended in one write; a lease lost under load (its fenced write
    // rejected) is the product working, so the journal holds the accepted ones.
    assert_eq!(
        report.journal_rows as u64, report.counts.accepted,
        "{report}"
    );
    assert_eq!(
        report.counts.accepted + report.counts.rejected + report.counts.failed,
        report.counts.acquired,
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

/// PostgreSQL running every transaction at `SERIALIZABLE` (as CockroachDB does), in a database
/// of its own that the test creates: acquisitions conflict and are retried, and still every
/// tick runs exactly once, with no error reported.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_serializable_bounded_stress() {
    let Some(url) = database_url(Backend::Postgres) else {
        return;
    };
    let url = serializable_database(&url).await;
    let options = StressOptions::new(Backend::Postgres, url);
    let report = run_stress(Path::new(EXE), &options)
        .await
        .expect("the run completes");
    println!("{options}\n{report}");
    assert_passed(&report);
    assert_eq!(
        report.counts.attempts,
        report.counts.acquired + report.counts.skipped,
        "errors reported at SERIALIZABLE: {report}"
    );
}

/// The URL of `shedlock_serializable` on the server of `url`, created if missing, with
/// `default_transaction_isolation = 'serializable'`.
async fn serializable_database(url: &str) -> String {
    use std::str::FromStr;

    use sqlx::{ConnectOptions, Connection, Executor};

    const DATABASE: &str = "shedlock_serializable";
    let options = sqlx::postgres::PgConnectOptions::from_str(url).expect("a valid URL");
    let mut admin = sqlx::PgConnection::connect_with(&options)
        .await
        .expect("connect to SHEDLOCK_TEST_PG_URL");
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
            .bind(DATABASE)
            .fetch_one(&mut admin)
            .await
            .expect("read pg_database");
    if !exists {
        // The shedlock-sqlx tests may create it at the same time.
        if let Err(e) = admin
            .execute(sqlx::AssertSqlSafe(format!("CREATE DATABASE {DATABASE}")))
            .await
        {
            let code = e.as_database_error().and_then(|d| d.code());
            assert!(matches!(code.as_deref(), Some("42P04" | "23505")), "{e}");
        }
    }
    admin
        .execute(sqlx::AssertSqlSafe(format!(
            "ALTER DATABASE {DATABASE} SET default_transaction_isolation = 'serializable'"
        )))
        .await
        .expect("make the database serializable");
    admin.close().await.expect("close");
    options.database(DATABASE).to_url_lossy().to_string()
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_bounded_stress() {
    bounded_stress(Backend::Etcd).await;
}
