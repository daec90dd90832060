//! `PgLockProvider` against a real PostgreSQL: the conformance suite, the SQL provider cases,
//! and PostgreSQL specifics (session time zones, release notifications, the fencing guard).
//! Needs `SHEDLOCK_TEST_PG_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::time::{Duration, SystemTime};

use chrono::NaiveDateTime;
use shedlock_core::{Error, LockProvider};
use shedlock_sqlx::PgLockProvider;
use sqlx::postgres::{PgListener, PgPoolOptions};
use sqlx::{AssertSqlSafe, Executor, PgPool};

use common::{DbHarness, database_url, lease_config, unique_table};

async fn pool_in_time_zone(time_zone: Option<&'static str>) -> Option<PgPool> {
    let url = database_url(
        "SHEDLOCK_TEST_PG_URL",
        "PostgreSQL",
        "postgres://root@127.0.0.1:5432/test",
    )?;
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                if let Some(zone) = time_zone {
                    conn.execute(AssertSqlSafe(format!("SET TIME ZONE '{zone}'")))
                        .await?;
                }
                Ok(())
            })
        })
        .connect(&url)
        .await
        .expect("connect to SHEDLOCK_TEST_PG_URL");
    Some(pool)
}

async fn pool() -> Option<PgPool> {
    pool_in_time_zone(None).await
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
        Some(DbHarness::over(provider))
    }

    shedlock_core::conformance_tests!(harness());
}

test_db!(Pg(PgPool) for PgLockProvider {
    timestamp: "TIMESTAMP",
    enforces_varchar: true,
    statements: [1, 1, 1, 1, 1],
    now: db_now,
    schema_query: "SELECT current_schema()::text",
});

async fn db_now(pool: &PgPool) -> SystemTime {
    let now: NaiveDateTime = sqlx::query_scalar("SELECT timezone('utc', clock_timestamp())")
        .fetch_one(pool)
        .await
        .expect("read the database clock");
    now.and_utc().into()
}

mod cases {
    use super::*;
    sql_provider_cases!(async {
        Some(Pg {
            pool: pool().await?,
        })
    });
}

/// Whether no notification arrives within `millis`.
async fn quiet_for(listener: &mut PgListener, millis: u64) -> bool {
    tokio::time::timeout(Duration::from_millis(millis), listener.recv())
        .await
        .is_err()
}

/// Releases notify the release channel in the same statement once the provider listens for
/// hints (or always, if so built), and `release_hints` delivers the lock name.
#[tokio::test]
async fn release_notifies_listeners() {
    let Some(pool) = pool().await else { return };
    let table = unique_table("shedlock_notify");
    let provider = PgLockProvider::builder(pool.clone())
        .table(&table)
        .build()
        .unwrap();
    provider.create_schema().await.unwrap();
    let channel = provider
        .release_channel()
        .expect("a channel by default")
        .to_owned();
    assert_eq!(channel, format!("{table}_released"));
    let mut listener = PgListener::connect_with(&pool).await.unwrap();
    listener.listen(&channel).await.unwrap();
    let c = lease_config("notified", Duration::from_secs(60));

    // Nobody in this process listens for hints yet: releases do not notify.
    let other_holder = provider.with_holder("other").unwrap();
    let lease = other_holder.acquire(&c).await.unwrap().unwrap();
    assert!(other_holder.release(&lease).await.unwrap());
    assert!(
        quiet_for(&mut listener, 300).await,
        "notified without listeners"
    );

    // Once it listens (asynchronously, after subscribing), releases by it and its clones do.
    let mut hints = provider.release_hints().expect("hints with a channel");
    let mut hinted = false;
    for _ in 0..50 {
        let lease = other_holder.acquire(&c).await.unwrap().unwrap();
        assert!(other_holder.release(&lease).await.unwrap());
        if let Ok(Ok(name)) = tokio::time::timeout(Duration::from_millis(100), hints.recv()).await {
            assert_eq!(&*name, "notified");
            hinted = true;
            break;
        }
    }
    assert!(hinted, "no release hint within 50 releases");
    let notification = listener.recv().await.unwrap();
    assert_eq!(notification.payload(), "notified");
    while !quiet_for(&mut listener, 100).await {}
    // A refused release notifies nobody.
    assert!(!other_holder.release(&lease).await.unwrap());
    assert!(
        quiet_for(&mut listener, 300).await,
        "a refused release notified"
    );

    let always = PgLockProvider::builder(pool.clone())
        .table(&table)
        .release_channel("Jobs Freed")
        .notify_every_release()
        .build()
        .unwrap();
    assert_eq!(always.release_channel(), Some("Jobs Freed"));
    listener.listen("Jobs Freed").await.unwrap();
    let lease = always.acquire(&c).await.unwrap().unwrap();
    assert!(always.release(&lease).await.unwrap());
    let notification = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("notified within 5 s")
        .unwrap();
    assert_eq!(
        (notification.channel(), notification.payload()),
        ("Jobs Freed", "notified")
    );

    let never = PgLockProvider::builder(pool.clone())
        .table(&table)
        .without_release_notify()
        .build()
        .unwrap();
    assert!(never.release_channel().is_none() && never.release_hints().is_none());

    for bad in [
        PgLockProvider::builder(pool.clone())
            .table(&table)
            .release_channel("c".repeat(64))
            .build(),
        PgLockProvider::builder(pool.clone())
            .table("a".repeat(60))
            .build(),
    ] {
        assert!(
            matches!(
                bad,
                Err(Error::InvalidConfig {
                    field: "release_channel",
                    ..
                })
            ),
            "{bad:?}"
        );
    }
    pool.execute(AssertSqlSafe(format!("DROP TABLE {table}")))
        .await
        .unwrap();
}

session_time_zones_case!(
    PgLockProvider,
    pool_in_time_zone,
    "Pacific/Kiritimati",
    "Pacific/Pago_Pago",
    db_now
);

fencing_guard_case!(PgLockProvider, pool, "$1");
