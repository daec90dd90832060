//! A release cut by an outage goes through once the server is back, long before the lease
//! would have run out: the executor retries it. PostgreSQL with its test URL, through a proxy
//! that cuts every connection; skipped without the URL, failed without it when `CI=true`.

#![cfg(feature = "postgres")]

use std::sync::Arc;
use std::time::Duration;

use shedlock_conformance::{CutProxy, ProxyMode, unique_table, upstream_of};
use shedlock_core::{LockConfiguration, LockProvider};
use shedlock_runtime::{LockEvent, LockingTaskExecutor, TaskResult};
use shedlock_sqlx::SqlLockProvider;
use shedlock_sqlx::dialect::Pg;
use shedlock_test_support::pg_url;
use sqlx::{AssertSqlSafe, PgPool};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_release_cut_by_an_outage_frees_the_lock_when_the_server_is_back() {
    let Some(url) = pg_url() else { return };
    let proxy = CutProxy::start(&upstream_of(&url).unwrap()).await.unwrap();
    let table = unique_table("release_retry");
    let pool = |url: &str| PgPool::connect_lazy(url).expect("a valid URL");
    let a = SqlLockProvider::<Pg>::builder(pool(&proxy.url_through(&url).unwrap()))
        .table(table.clone())
        .holder("a")
        .build()
        .unwrap();
    let b = SqlLockProvider::<Pg>::builder(pool(&url))
        .table(table)
        .holder("b")
        .build()
        .unwrap();
    b.create_schema().await.unwrap();
    let released = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&released);
    let executor = LockingTaskExecutor::new(a).with_listener(move |event: &LockEvent<'_>| {
        if let LockEvent::Released(_) = event {
            signal.notify_one();
        }
    });
    // A minute's lease: freed sooner only by a release.
    let lock = LockConfiguration::new("cut", Duration::from_secs(60), Duration::ZERO).unwrap();

    let outcome = executor
        .execute(&lock, async { proxy.set(ProxyMode::Reset) })
        .await
        .unwrap();
    assert_eq!(outcome, TaskResult::Executed(()));
    assert!(
        b.acquire(&lock).await.unwrap().is_none(),
        "the release went through the cut"
    );

    proxy.set(ProxyMode::Open);
    // Without the retry no release comes: the lease would simply run out after the minute.
    tokio::time::timeout(Duration::from_secs(30), released.notified())
        .await
        .expect("the release cut by the outage was not retried once the server was back");
    let lease = b
        .acquire(&lock)
        .await
        .unwrap()
        .expect("free again, within the minute's lease");
    assert!(b.release(&lease).await.unwrap());

    for table in [b.runs_table(), b.table()] {
        let sql = format!("DROP TABLE IF EXISTS {table}");
        sqlx::raw_sql(AssertSqlSafe(sql))
            .execute(b.pool())
            .await
            .expect("drop the test's table");
    }
}
