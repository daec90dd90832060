//! `PgLockProvider` against a real PostgreSQL: the conformance suite and PostgreSQL specifics.
//! Needs `SHEDLOCK_TEST_PG_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chrono::NaiveDateTime;
use shedlock_core::{LockConfiguration, LockProvider};
use shedlock_sqlx::PgLockProvider;
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;

use common::{DbHarness, database_url, millis_between, unique_table};

async fn pool() -> Option<PgPool> {
    let url = database_url(
        "SHEDLOCK_TEST_PG_URL",
        "PostgreSQL",
        "postgres://root@127.0.0.1:5432/test",
    )?;
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect(&url)
        .await
        .expect("connect to SHEDLOCK_TEST_PG_URL");
    Some(pool)
}

/// A provider on a fresh table of its own.
async fn provider_on_new_table() -> Option<PgLockProvider> {
    let provider = PgLockProvider::builder(pool().await?)
        .table(unique_table("shedlock_pg"))
        .holder("tester")
        .build()
        .expect("valid configuration");
    provider.create_schema().await.expect("create schema");
    Some(provider)
}

async fn drop_table(provider: &PgLockProvider, table: &str) {
    sqlx::query(sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}")))
        .execute(provider.pool())
        .await
        .expect("drop table");
}

mod conformance {
    use super::*;

    /// All cases share one table (lock names are unique per case); `create_schema` is safe to
    /// run concurrently.
    async fn harness() -> Option<DbHarness> {
        let provider = PgLockProvider::builder(pool().await?)
            .table("shedlock_conformance")
            .build()
            .expect("valid configuration");
        provider.create_schema().await.expect("create schema");
        Some(DbHarness::new(move |holder| {
            Arc::new(provider.with_holder(holder).expect("valid holder")) as Arc<dyn LockProvider>
        }))
    }

    shedlock_core::conformance_tests!(harness());
}

fn config(name: &str, at_most: Duration) -> LockConfiguration {
    LockConfiguration::new(name, at_most, Duration::ZERO).expect("valid")
}

#[tokio::test]
async fn lease_times_come_from_the_database_clock() {
    let Some(provider) = provider_on_new_table().await else {
        return;
    };
    let table = provider.table().to_owned();
    let at_most = Duration::from_millis(12_345);
    let lease = provider
        .acquire(&config("db-time", at_most))
        .await
        .unwrap()
        .expect("acquired");
    let db_now: NaiveDateTime = sqlx::query_scalar("SELECT timezone('utc', clock_timestamp())")
        .fetch_one(provider.pool())
        .await
        .unwrap();
    let db_now: SystemTime = db_now.and_utc().into();
    assert_eq!(
        millis_between(lease.locked_at(), lease.lock_until()),
        12_345,
        "lock_until - locked_at is exactly lock_at_most_for"
    );
    assert!(millis_between(lease.locked_at(), db_now).abs() < 1_000);
    drop_table(&provider, &table).await;
}
