//! `MySqlLockProvider` against a real MySQL or MariaDB: the conformance suite, the SQL provider
//! cases, and MySQL specifics (session time zones, case-sensitive names, the fencing guard).
//! Needs `SHEDLOCK_TEST_MYSQL_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chrono::NaiveDateTime;
use shedlock_core::{Error, LockConfiguration, LockProvider};
use shedlock_sqlx::{ColumnNames, LockRow, MySqlLockProvider};
use sqlx::mysql::MySqlPoolOptions;
use sqlx::{AssertSqlSafe, Executor, MySqlPool};

use common::scenarios::{ProviderExt, TestDb};
use common::{DbHarness, database_url, millis_between, unique_table};

async fn pool_in_time_zone(time_zone: Option<&'static str>) -> Option<MySqlPool> {
    let url = database_url(
        "SHEDLOCK_TEST_MYSQL_URL",
        "MySQL/MariaDB",
        "mysql://root@127.0.0.1:3306/test",
    )?;
    let pool = MySqlPoolOptions::new()
        .max_connections(4)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                if let Some(zone) = time_zone {
                    conn.execute(AssertSqlSafe(format!("SET time_zone = '{zone}'")))
                        .await?;
                }
                Ok(())
            })
        })
        .connect(&url)
        .await
        .expect("connect to SHEDLOCK_TEST_MYSQL_URL");
    Some(pool)
}

async fn pool() -> Option<MySqlPool> {
    pool_in_time_zone(None).await
}

mod conformance {
    use super::*;

    /// All cases share one table (lock names are unique per case).
    async fn harness() -> Option<DbHarness> {
        let provider = MySqlLockProvider::builder(pool().await?)
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

struct MySql {
    pool: MySqlPool,
}

impl ProviderExt for MySqlLockProvider {
    fn table_name(&self) -> &str {
        self.table()
    }
    fn clone_as(&self, holder: &str) -> Self {
        self.with_holder(holder).expect("valid holder")
    }
}

#[shedlock_core::async_trait]
impl TestDb for MySql {
    type Provider = MySqlLockProvider;
    const TIMESTAMP: &'static str = "DATETIME(3)";
    const ENFORCES_VARCHAR: bool = true;

    fn build(
        &self,
        table: &str,
        columns: ColumnNames,
        holder: &str,
    ) -> Result<MySqlLockProvider, Error> {
        MySqlLockProvider::builder(self.pool.clone())
            .table(table)
            .columns(columns)
            .holder(holder)
            .build()
    }
    async fn create_schema(provider: &MySqlLockProvider) -> Result<(), Error> {
        provider.create_schema().await
    }
    async fn lock_state(
        provider: &MySqlLockProvider,
        name: &str,
    ) -> Result<Option<LockRow>, Error> {
        provider.lock_state(name).await
    }
    async fn list_locks(provider: &MySqlLockProvider) -> Result<Vec<LockRow>, Error> {
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
        let schema: Option<String> = sqlx::query_scalar("SELECT DATABASE()")
            .fetch_one(&self.pool)
            .await
            .unwrap();
        schema.expect("the URL names a database")
    }
}

async fn db_now(pool: &MySqlPool) -> SystemTime {
    let now: NaiveDateTime = sqlx::query_scalar("SELECT UTC_TIMESTAMP(3)")
        .fetch_one(pool)
        .await
        .expect("read the database clock");
    now.and_utc().into()
}

mod cases {
    use super::*;
    sql_provider_cases!(async {
        Some(MySql {
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
        pool_in_time_zone(Some("+13:00")).await,
        pool_in_time_zone(Some("-12:00")).await,
    ) else {
        return;
    };
    let table = unique_table("shedlock_tz");
    let a = MySqlLockProvider::builder(east)
        .table(&table)
        .holder("east")
        .build()
        .unwrap();
    let b = MySqlLockProvider::builder(west.clone())
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

/// In a table made by `create_schema` lock names are case-sensitive, as in the other dialects.
#[tokio::test]
async fn lock_names_are_case_sensitive() {
    let Some(pool) = pool().await else { return };
    let table = unique_table("shedlock_case");
    let provider = MySqlLockProvider::builder(pool.clone())
        .table(&table)
        .build()
        .unwrap();
    provider.create_schema().await.unwrap();
    for name in ["Report", "report", "REPORT"] {
        assert!(
            provider
                .acquire(&config(name, Duration::from_secs(60)))
                .await
                .unwrap()
                .is_some(),
            "{name}"
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
    let a = MySqlLockProvider::builder(pool.clone())
        .table(&table)
        .holder("a")
        .build()
        .unwrap();
    let b = a.with_holder("b").unwrap();
    a.create_schema().await.unwrap();
    pool.execute(AssertSqlSafe(format!("CREATE TABLE {data} (token BIGINT)")))
        .await
        .unwrap();
    let insert = format!("INSERT INTO {data} VALUES (?)");

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
