//! Real databases for the facade's tests: a fresh lock table per test and providers per
//! holder. URLs (skip without one; fail instead under `CI=true`) and unique names come from
//! `shedlock-test-support`.

#![allow(dead_code)] // each test binary uses a different part

use std::sync::Arc;

use shedlock::{LockProvider, MySqlLockProvider, PgLockProvider, SqliteLockProvider};
use shedlock_test_support::{mysql_url, pg_url, unique_table};

/// A database kind under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Db {
    Sqlite,
    Postgres,
    MySql,
}

/// One provider, typed, so tests can use its fencing guard and pool.
#[derive(Debug, Clone)]
pub(crate) enum Provider {
    Sqlite(SqliteLockProvider),
    Postgres(PgLockProvider),
    MySql(MySqlLockProvider),
}

impl Provider {
    pub(crate) fn shared(&self) -> Arc<dyn LockProvider> {
        match self {
            Provider::Sqlite(p) => Arc::new(p.clone()),
            Provider::Postgres(p) => Arc::new(p.clone()),
            Provider::MySql(p) => Arc::new(p.clone()),
        }
    }

    pub(crate) fn with_holder(&self, holder: &str) -> Provider {
        match self {
            Provider::Sqlite(p) => Provider::Sqlite(p.with_holder(holder).unwrap()),
            Provider::Postgres(p) => Provider::Postgres(p.with_holder(holder).unwrap()),
            Provider::MySql(p) => Provider::MySql(p.with_holder(holder).unwrap()),
        }
    }

    /// Closes this provider's connections: every later store call fails.
    pub(crate) async fn close(&self) {
        match self {
            Provider::Sqlite(p) => p.pool().close().await,
            Provider::Postgres(p) => p.pool().close().await,
            Provider::MySql(p) => p.pool().close().await,
        }
    }

    /// Removes what [`provider`] created: the table on a server; the database file (with its
    /// `-wal` and `-shm`) on SQLite. Call it at the end of a test, so a run leaves nothing.
    pub(crate) async fn remove_store(&self) {
        match self {
            Provider::Sqlite(p) => {
                let file = p.pool().connect_options().get_filename().to_owned();
                p.pool().close().await;
                for suffix in ["", "-wal", "-shm"] {
                    let mut path = file.clone().into_os_string();
                    path.push(suffix);
                    let _ = std::fs::remove_file(path);
                }
            }
            Provider::Postgres(p) => drop_table(p.pool(), p.table()).await,
            Provider::MySql(p) => drop_table(p.pool(), p.table()).await,
        }
    }

    /// Ends a lease behind its holder's back: `lock_until` an hour ago, on the database clock.
    pub(crate) async fn expire_in_store(&self, lock_name: &str) {
        let rows = match self {
            Provider::Sqlite(p) => sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {} SET lock_until = strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 hour') WHERE name = ?",
                p.table()
            )))
            .bind(lock_name)
            .execute(p.pool())
            .await
            .map(|r| r.rows_affected()),
            Provider::Postgres(p) => sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {} SET lock_until = timezone('utc', clock_timestamp()) - interval '1 hour' WHERE name = $1",
                p.table()
            )))
            .bind(lock_name)
            .execute(p.pool())
            .await
            .map(|r| r.rows_affected()),
            Provider::MySql(p) => sqlx::query(sqlx::AssertSqlSafe(format!(
                "UPDATE {} SET lock_until = UTC_TIMESTAMP(3) - INTERVAL 1 HOUR WHERE name = ?",
                p.table()
            )))
            .bind(lock_name)
            .execute(p.pool())
            .await
            .map(|r| r.rows_affected()),
        };
        assert_eq!(rows.expect("expire the lease in the store"), 1);
    }

    /// A write fenced by `(lock_name, token)` in this database: `Ok` if the guard let it through.
    pub(crate) async fn fenced_write(
        &self,
        lock_name: &str,
        token: u64,
    ) -> Result<(), shedlock::Error> {
        match self {
            Provider::Sqlite(p) => {
                let mut tx = p.pool().begin_with("BEGIN IMMEDIATE").await.unwrap();
                p.verify_lease(&mut tx, lock_name, token).await?;
                tx.commit().await.unwrap();
            }
            Provider::Postgres(p) => {
                let mut tx = p.pool().begin().await.unwrap();
                p.verify_lease(&mut tx, lock_name, token).await?;
                tx.commit().await.unwrap();
            }
            Provider::MySql(p) => {
                let mut tx = p.pool().begin().await.unwrap();
                p.verify_lease(&mut tx, lock_name, token).await?;
                tx.commit().await.unwrap();
            }
        }
        Ok(())
    }
}

async fn drop_table<DB: sqlx::Database>(pool: &sqlx::Pool<DB>, table: &str)
where
    for<'c> &'c sqlx::Pool<DB>: sqlx::Executor<'c, Database = DB>,
{
    let statement = sqlx::AssertSqlSafe(format!("DROP TABLE IF EXISTS {table}"));
    sqlx::raw_sql(statement)
        .execute(pool)
        .await
        .expect("drop the test table");
}

/// A provider over a fresh table of its own, as holder `holder`; `None` when skipped.
pub(crate) async fn provider(db: Db, holder: &str) -> Option<Provider> {
    let table = unique_table("facade");
    let provider = match db {
        Db::Sqlite => {
            let path = std::env::temp_dir().join(format!("{table}.db"));
            let p = SqliteLockProvider::connect(&format!("sqlite://{}", path.display()))
                .await
                .unwrap();
            Provider::Sqlite(
                SqliteLockProvider::builder(p.pool().clone())
                    .table(&table)
                    .holder(holder)
                    .build()
                    .unwrap(),
            )
        }
        Db::Postgres => {
            let pool = sqlx::PgPool::connect(&pg_url()?).await.unwrap();
            Provider::Postgres(
                PgLockProvider::builder(pool)
                    .table(&table)
                    .holder(holder)
                    .build()
                    .unwrap(),
            )
        }
        Db::MySql => {
            let pool = sqlx::MySqlPool::connect(&mysql_url()?).await.unwrap();
            Provider::MySql(
                MySqlLockProvider::builder(pool)
                    .table(&table)
                    .holder(holder)
                    .build()
                    .unwrap(),
            )
        }
    };
    match &provider {
        Provider::Sqlite(p) => p.create_schema().await.unwrap(),
        Provider::Postgres(p) => p.create_schema().await.unwrap(),
        Provider::MySql(p) => p.create_schema().await.unwrap(),
    }
    Some(provider)
}

/// Another instance on the same table, with its own connections (so closing them cuts only it).
pub(crate) async fn another_instance(of: &Provider, holder: &str) -> Provider {
    match of {
        Provider::Sqlite(p) => {
            let pool = sqlx::SqlitePool::connect_with((*p.pool().connect_options()).clone())
                .await
                .unwrap();
            Provider::Sqlite(
                SqliteLockProvider::builder(pool)
                    .table(p.table())
                    .holder(holder)
                    .build()
                    .unwrap(),
            )
        }
        Provider::Postgres(p) => {
            let pool = sqlx::PgPool::connect_with((*p.pool().connect_options()).clone())
                .await
                .unwrap();
            Provider::Postgres(
                PgLockProvider::builder(pool)
                    .table(p.table())
                    .holder(holder)
                    .build()
                    .unwrap(),
            )
        }
        Provider::MySql(p) => {
            let pool = sqlx::MySqlPool::connect_with((*p.pool().connect_options()).clone())
                .await
                .unwrap();
            Provider::MySql(
                MySqlLockProvider::builder(pool)
                    .table(p.table())
                    .holder(holder)
                    .build()
                    .unwrap(),
            )
        }
    }
}
