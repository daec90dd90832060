//! The providers with `dedicated_connections` (which the benchmarks measure), on PostgreSQL
//! and MariaDB: the conformance suite, recovery from a connection the server killed, and
//! operations cancelled mid-statement. Needs `SHEDLOCK_TEST_PG_URL` / `SHEDLOCK_TEST_MYSQL_URL`;
//! skipped without them, failed without them when `CI=true`.

use std::sync::Arc;
use std::time::Duration;

use shedlock::conformance::unique_lock_name;
use shedlock::{LockConfiguration, LockProvider, sql::MySqlLockProvider, sql::PgLockProvider};
use shedlock_conformance::ServerHarness;
use shedlock_test_support::{mysql_url, pg_url};

/// Connections kept by the providers under test: fewer than the fuzz case's workers, so
/// operations also wait for one another's connections.
const DEDICATED: usize = 2;

async fn pg_provider(table: &str) -> Option<PgLockProvider> {
    let pool = sqlx::PgPool::connect(&pg_url()?)
        .await
        .expect("connect to SHEDLOCK_TEST_PG_URL");
    let provider = PgLockProvider::builder(pool)
        .table(table)
        .dedicated_connections(DEDICATED)
        .build()
        .expect("valid configuration");
    provider.create_schema().await.expect("create schema");
    Some(provider)
}

async fn mysql_provider() -> Option<MySqlLockProvider> {
    let pool = sqlx::MySqlPool::connect(&mysql_url()?)
        .await
        .expect("connect to SHEDLOCK_TEST_MYSQL_URL");
    let provider = MySqlLockProvider::builder(pool)
        .table("shedlock_bench_dedicated")
        .dedicated_connections(DEDICATED)
        .build()
        .expect("valid configuration");
    provider.create_schema().await.expect("create schema");
    Some(provider)
}

mod postgres {
    use super::*;

    async fn harness() -> Option<ServerHarness> {
        let provider = pg_provider("shedlock_bench_dedicated").await?;
        // Every holder shares the first provider's dedicated connections.
        Some(ServerHarness::new(move |holder| {
            Arc::new(provider.with_holder(holder).expect("valid holder"))
        }))
    }

    shedlock::conformance::conformance_tests!(harness());
}

mod mysql {
    use super::*;

    async fn harness() -> Option<ServerHarness> {
        let provider = mysql_provider().await?;
        // Every holder shares the first provider's dedicated connections.
        Some(ServerHarness::new(move |holder| {
            Arc::new(provider.with_holder(holder).expect("valid holder"))
        }))
    }

    shedlock::conformance::conformance_tests!(harness());
}

fn config(name: &str) -> LockConfiguration {
    LockConfiguration::new(name, Duration::from_secs(60), Duration::ZERO).expect("valid")
}

/// Acquires and releases `name` once; panics if that fails.
async fn pair(provider: &dyn LockProvider, name: &str) {
    let lease = provider.acquire(&config(name)).await.expect("acquire");
    let lease = lease.expect("the lock is free");
    assert!(provider.release(&lease).await.expect("release"));
}

/// Operations dropped at random points (before, during and after their statements) leave
/// neither a broken connection in use nor the lock in an unknown state beyond its lease.
async fn cancelled_operations_leave_no_broken_connection(provider: &dyn LockProvider) {
    for i in 0..200u64 {
        let name = unique_lock_name("cancelled");
        let cancel_after = Duration::from_micros(i * 37 % 1500);
        if let Ok(Ok(Some(lease))) =
            tokio::time::timeout(cancel_after, provider.acquire(&config(&name))).await
        {
            let _ = tokio::time::timeout(cancel_after, provider.release(&lease)).await;
        }
        // Whatever happened above, a fresh lock name works on the next connection handed out.
        pair(provider, &unique_lock_name("after-cancel")).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_cancelled_operations() {
    if let Some(provider) = pg_provider("shedlock_bench_dedicated").await {
        cancelled_operations_leave_no_broken_connection(&provider).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_cancelled_operations() {
    if let Some(provider) = mysql_provider().await {
        cancelled_operations_leave_no_broken_connection(&provider).await;
    }
}

/// The server ends every dedicated connection: one operation fails (with a store error, never a
/// panic), the idle connections are closed with the broken one, and the provider works again
/// on new ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_recovers_from_connections_killed_by_the_server() {
    // A table of its own: the connections to kill are found by the table their last statement
    // named, and the other tests' must survive.
    let Some(provider) = pg_provider("shedlock_bench_dedicated_kill").await else {
        return;
    };
    let name = unique_lock_name("killed");
    // Both connections open and idle.
    let other = unique_lock_name("killed-other");
    tokio::join!(pair(&provider, &name), pair(&provider, &other));
    let killed: i64 = sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND pid <> pg_backend_pid() \
         AND query LIKE '%shedlock_bench_dedicated_kill %'",
    )
    .fetch_one(provider.pool())
    .await
    .expect("terminate");
    assert!(killed >= 1, "no dedicated connection found to kill");
    let mut failures = 0;
    for _ in 0..10 {
        match provider.acquire(&config(&name)).await {
            Ok(Some(lease)) => {
                provider.release(&lease).await.expect("release");
            }
            Ok(None) => panic!("the lock was released"),
            Err(error) => {
                assert!(matches!(error, shedlock::Error::Store { .. }), "{error:?}");
                failures += 1;
            }
        }
    }
    assert!(failures <= 1, "{failures} failures");
    pair(&provider, &name).await;
}

/// Closing the pool is not held up by the dedicated connections, and ends them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_pool_close_is_not_held_up() {
    let Some(provider) = pg_provider("shedlock_bench_dedicated").await else {
        return;
    };
    pair(&provider, &unique_lock_name("close")).await;
    tokio::time::timeout(Duration::from_secs(10), provider.pool().close())
        .await
        .expect("pool closed in time");
    let after = provider.acquire(&config(&unique_lock_name("closed"))).await;
    assert!(
        matches!(after, Err(shedlock::Error::Store { .. })),
        "{after:?}"
    );
}
