//! `PgLockProvider` against a real PostgreSQL: the conformance suite, the SQL provider cases,
//! and PostgreSQL specifics (session time zones, release notifications, the fencing guard).
//! Needs `SHEDLOCK_TEST_PG_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chrono::NaiveDateTime;
use shedlock_core::{Error, LockConfiguration, LockProvider};
use shedlock_sqlx::{ColumnNames, LockRow, PgLockProvider};
use sqlx::postgres::{PgListener, PgPoolOptions};
use sqlx::{AssertSqlSafe, Executor, PgPool};

use common::scenarios::{ProviderExt, TestDb};
use common::{DbHarness, database_url, millis_between, unique_table};

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
        Some(DbHarness::new(move |holder| {
            Arc::new(provider.clone_as(holder)) as Arc<dyn LockProvider>
        }))
    }

    shedlock_core::conformance_tests!(harness());
}

struct Pg {
    pool: PgPool,
}

impl ProviderExt for PgLockProvider {
    fn table_name(&self) -> &str {
        self.table()
    }
    fn clone_as(&self, holder: &str) -> Self {
        self.with_holder(holder).expect("valid holder")
    }
}

#[shedlock_core::async_trait]
impl TestDb for Pg {
    type Provider = PgLockProvider;
    const TIMESTAMP: &'static str = "TIMESTAMP";
    const ENFORCES_VARCHAR: bool = true;

    fn build(
        &self,
        table: &str,
        columns: ColumnNames,
        holder: &str,
    ) -> Result<PgLockProvider, Error> {
        PgLockProvider::builder(self.pool.clone())
            .table(table)
            .columns(columns)
            .holder(holder)
            .build()
    }
    async fn create_schema(provider: &PgLockProvider) -> Result<(), Error> {
        provider.create_schema().await
    }
    async fn lock_state(provider: &PgLockProvider, name: &str) -> Result<Option<LockRow>, Error> {
        provider.lock_state(name).await
    }
    async fn list_locks(provider: &PgLockProvider) -> Result<Vec<LockRow>, Error> {
        provider.list_locks().await
    }
    async fn execute(&self, sql: &str) {
        sqlx::raw_sql(AssertSqlSafe(sql.to_owned()))
            .execute(&self.pool)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    async fn now(&self) -> SystemTime {
        db_now(&self.pool).await
    }
    async fn schema(&self) -> String {
        "public".to_owned()
    }
}

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

fn config(name: &str, at_most: Duration) -> LockConfiguration {
    LockConfiguration::new(name, at_most, Duration::ZERO).expect("valid configuration")
}

/// Instances differ in session time zone (and, in the field, in clock): the provider reads
/// neither. Two providers whose sessions run 25 hours apart exclude each other and see the same
/// `lock_until`, which is the database's UTC clock plus the lease.
#[tokio::test]
async fn session_time_zones_do_not_matter() {
    let (Some(east), Some(west)) = (
        pool_in_time_zone(Some("Pacific/Kiritimati")).await,
        pool_in_time_zone(Some("Pacific/Pago_Pago")).await,
    ) else {
        return;
    };
    let table = unique_table("shedlock_tz");
    let a = PgLockProvider::builder(east)
        .table(&table)
        .holder("east")
        .build()
        .unwrap();
    let b = PgLockProvider::builder(west.clone())
        .table(&table)
        .holder("west")
        .build()
        .unwrap();
    a.create_schema().await.unwrap();
    let c = config("tz", Duration::from_secs(60));
    let lease = a.acquire(&c).await.unwrap().expect("acquired");
    assert!(
        b.acquire(&c).await.unwrap().is_none(),
        "west acquired east's lock"
    );
    let (seen_by_a, seen_by_b) = (
        a.lock_state("tz").await.unwrap().unwrap(),
        b.lock_state("tz").await.unwrap().unwrap(),
    );
    assert_eq!(seen_by_a, seen_by_b);
    assert_eq!(seen_by_a.lock_until, lease.lock_until());
    let now = db_now(&west).await;
    assert!(millis_between(lease.locked_at(), now).abs() < 1_000);
    // What an instance 3 hours ahead would have written had it used its own clock.
    let skewed_local = SystemTime::now() + Duration::from_secs(3 * 3600);
    assert!(millis_between(lease.locked_at(), skewed_local) > 2 * 3600 * 1000);
    a.pool()
        .execute(AssertSqlSafe(format!("DROP TABLE {table}")))
        .await
        .unwrap();
}

/// A release notifies the release channel in the same statement, and `release_hints` delivers
/// the lock name; a provider built without notifications has neither.
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
        .expect("notifications on by default")
        .to_owned();
    assert_eq!(channel, format!("{table}_released"));

    let mut listener = PgListener::connect_with(&pool).await.unwrap();
    listener.listen(&channel).await.unwrap();
    let c = config("notified", Duration::from_secs(60));
    let lease = provider.acquire(&c).await.unwrap().unwrap();
    assert!(provider.release(&lease).await.unwrap());
    let notification = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("notified within 5 s")
        .unwrap();
    assert_eq!(notification.payload(), "notified");
    // A refused release notifies nobody.
    assert!(!provider.release(&lease).await.unwrap());
    assert!(
        tokio::time::timeout(Duration::from_millis(300), listener.recv())
            .await
            .is_err()
    );

    // The hint task LISTENs asynchronously after subscribing: release until a hint arrives.
    let mut hints = provider.release_hints().expect("hints with a channel");
    let mut hinted = false;
    for _ in 0..50 {
        let lease = provider.acquire(&c).await.unwrap().unwrap();
        assert!(provider.release(&lease).await.unwrap());
        if let Ok(Ok(name)) = tokio::time::timeout(Duration::from_millis(100), hints.recv()).await {
            assert_eq!(&*name, "notified");
            hinted = true;
            break;
        }
    }
    assert!(hinted, "no release hint within 50 releases");

    let quiet = PgLockProvider::builder(pool.clone())
        .table(&table)
        .without_release_notify()
        .build()
        .unwrap();
    assert!(quiet.release_channel().is_none() && quiet.release_hints().is_none());
    let lease = quiet.acquire(&c).await.unwrap().unwrap();
    assert!(quiet.release(&lease).await.unwrap());

    let custom = PgLockProvider::builder(pool.clone())
        .table(&table)
        .release_channel("Jobs Freed")
        .build()
        .unwrap();
    assert_eq!(custom.release_channel(), Some("Jobs Freed"));
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

/// The fencing guard: a live lease may write; a paused holder whose lease was taken over is
/// refused; and while a guarded transaction runs, nobody can take the lock over.
#[tokio::test]
async fn fencing_guard_orders_writes() {
    let Some(pool) = pool().await else { return };
    let table = unique_table("shedlock_fence");
    let data = unique_table("fenced_data");
    let a = PgLockProvider::builder(pool.clone())
        .table(&table)
        .holder("a")
        .build()
        .unwrap();
    let b = a.with_holder("b").unwrap();
    a.create_schema().await.unwrap();
    pool.execute(AssertSqlSafe(format!("CREATE TABLE {data} (token BIGINT)")))
        .await
        .unwrap();
    let insert = format!("INSERT INTO {data} VALUES ($1)");

    let lease_len = Duration::from_millis(400);
    let c = config("fenced", lease_len);
    let paused = a.acquire(&c).await.unwrap().unwrap();
    let mut tx = pool.begin().await.unwrap();
    a.verify_lease(&mut tx, "fenced", paused.fencing_token())
        .await
        .expect("live lease");
    sqlx::query(AssertSqlSafe(insert.as_str()))
        .bind(paused.fencing_token() as i64)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    tokio::time::sleep(lease_len + Duration::from_millis(100)).await;
    let current = b.acquire(&c).await.unwrap().expect("taken over");
    let mut tx = pool.begin().await.unwrap();
    let stale = a
        .verify_lease(&mut tx, "fenced", paused.fencing_token())
        .await;
    assert!(matches!(stale, Err(Error::LockLost { .. })), "{stale:?}");
    tx.rollback().await.unwrap();

    // b verifies, then its lease runs out while its transaction is still open: a takeover
    // waits for the transaction, so b's write still lands before the next holder's.
    let mut tx = pool.begin().await.unwrap();
    b.verify_lease(&mut tx, "fenced", current.fencing_token())
        .await
        .expect("live lease");
    tokio::time::sleep(lease_len + Duration::from_millis(100)).await;
    let a2 = a.clone();
    let c2 = c.clone();
    let takeover = tokio::spawn(async move { a2.acquire(&c2).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !takeover.is_finished(),
        "took over during a guarded transaction"
    );
    sqlx::query(AssertSqlSafe(insert.as_str()))
        .bind(current.fencing_token() as i64)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let next = takeover
        .await
        .unwrap()
        .unwrap()
        .expect("taken over after the commit");
    assert!(next.fencing_token() > current.fencing_token());

    let written: Vec<i64> = sqlx::query_scalar(AssertSqlSafe(format!("SELECT token FROM {data}")))
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(
        written,
        [
            paused.fencing_token() as i64,
            current.fencing_token() as i64
        ]
    );
    pool.execute(AssertSqlSafe(format!("DROP TABLE {table}, {data}")))
        .await
        .unwrap();
}
