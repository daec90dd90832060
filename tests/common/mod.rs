//! Real databases for the facade's tests: a fresh lock table per test and providers per
//! holder. URLs (skip without one; fail instead under `CI=true`) and unique names come from
//! `shedlock-test-support`.

#![allow(dead_code)] // each test binary uses a different part

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock::sql::SqlLockProvider;
use shedlock::sql::dialect::Dialect;
use shedlock::{
    Lock, LockConfiguration, LockContext, LockProvider, LockingTaskExecutor,
    sql::MySqlLockProvider, sql::PgLockProvider, sql::SqliteLockProvider,
};
use shedlock_conformance::unique_table;
use shedlock_test_support::{mysql_url, pg_url};

/// The time since the epoch, as runs note it.
pub(crate) fn since_epoch() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

/// One run of a job, as the job saw it.
#[derive(Debug, Clone)]
pub(crate) struct Run {
    pub(crate) holder: String,
    pub(crate) token: u64,
    pub(crate) start: Duration,
    pub(crate) end: Duration,
}

impl Run {
    /// Runs a job that takes microseconds, under `lock`: what it saw.
    pub(crate) async fn of_a_microsecond_job(lock: &LockContext) -> Run {
        let start = since_epoch();
        tokio::task::yield_now().await;
        Run {
            holder: lock.holder(),
            token: lock.fencing_token(),
            start,
            end: since_epoch(),
        }
    }
}

/// A database kind under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Db {
    Sqlite,
    Postgres,
    MySql,
}

/// Each scenario, an `async fn(Db)` of the calling test file, as one `#[tokio::test]`
/// (multi-threaded, two workers) per database, in a module per database:
/// `sql_tests!(election);` makes `sqlite::election`, `postgres::election` and `mysql::election`.
#[macro_export]
macro_rules! sql_tests {
    ($($scenario:ident),+ $(,)?) => {
        $crate::sql_tests!(@on sqlite, Sqlite, $($scenario),+);
        $crate::sql_tests!(@on postgres, Postgres, $($scenario),+);
        $crate::sql_tests!(@on mysql, MySql, $($scenario),+);
    };
    (@on $module:ident, $db:ident, $($scenario:ident),+) => {
        mod $module {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $scenario() {
                    super::$scenario($crate::common::Db::$db).await;
                }
            )+
        }
    };
}

/// One provider, typed, so tests can use its fencing guard and pool.
#[derive(Debug, Clone)]
pub(crate) enum Provider {
    Sqlite(SqliteLockProvider),
    Postgres(PgLockProvider),
    MySql(MySqlLockProvider),
}

/// `$body` with `$p` bound to the typed provider inside `$provider`, whatever its database
/// (each arm is compiled for its own provider type).
macro_rules! each {
    ($provider:expr, $p:ident => $body:expr) => {
        match $provider {
            Provider::Sqlite($p) => $body,
            Provider::Postgres($p) => $body,
            Provider::MySql($p) => $body,
        }
    };
}

/// The same, for a `$body` giving another provider of that database.
macro_rules! map_each {
    ($provider:expr, $p:ident => $body:expr) => {
        match $provider {
            Provider::Sqlite($p) => Provider::Sqlite($body),
            Provider::Postgres($p) => Provider::Postgres($body),
            Provider::MySql($p) => Provider::MySql($body),
        }
    };
}

impl Provider {
    pub(crate) fn shared(&self) -> Arc<dyn LockProvider> {
        each!(self, p => Arc::new(p.clone()))
    }

    pub(crate) fn with_holder(&self, holder: &str) -> Provider {
        map_each!(self, p => p.with_holder(holder).unwrap())
    }

    /// Closes this provider's connections: every later store call fails.
    pub(crate) async fn close(&self) {
        each!(self, p => p.pool().close().await);
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
        let (an_hour_ago, name) = match self {
            Provider::Sqlite(_) => ("strftime('%Y-%m-%d %H:%M:%f', 'now', '-1 hour')", "?"),
            Provider::Postgres(_) => (
                "timezone('utc', clock_timestamp()) - interval '1 hour'",
                "$1",
            ),
            Provider::MySql(_) => ("UTC_TIMESTAMP(3) - INTERVAL 1 HOUR", "?"),
        };
        let table = each!(self, p => p.table());
        let statement =
            format!("UPDATE {table} SET lock_until = {an_hour_ago} WHERE name = {name}");
        let rows = each!(self, p => sqlx::query(sqlx::AssertSqlSafe(statement))
            .bind(lock_name)
            .execute(p.pool())
            .await
            .map(|r| r.rows_affected()));
        assert_eq!(rows.expect("expire the lease in the store"), 1);
    }

    /// Ends the lease of `lock` behind its holder's back (as [`expire_in_store`](Self::expire_in_store)),
    /// and `thief` takes the lock: its lock.
    pub(crate) async fn steal(
        &self,
        lock: &LockConfiguration,
        thief: &LockingTaskExecutor,
    ) -> Lock {
        self.expire_in_store(lock.name()).await;
        thief
            .try_lock(lock)
            .await
            .unwrap()
            .expect("an expired lease is taken over")
    }

    /// A write fenced by `(lock_name, token)` in this database: `Ok` if the guard let it through.
    pub(crate) async fn fenced_write(
        &self,
        lock_name: &str,
        token: u64,
    ) -> Result<(), shedlock::Error> {
        match self {
            Provider::Sqlite(p) => {
                // SQLite: the write lock at once, as a fenced write needs it.
                let tx = p.pool().begin_with("BEGIN IMMEDIATE").await.unwrap();
                fenced(p, tx, lock_name, token).await
            }
            Provider::Postgres(p) => {
                fenced(p, p.pool().begin().await.unwrap(), lock_name, token).await
            }
            Provider::MySql(p) => {
                fenced(p, p.pool().begin().await.unwrap(), lock_name, token).await
            }
        }
    }
}

/// Checks the lease `(lock_name, token)` in `tx` and commits it.
async fn fenced<D: Dialect>(
    provider: &SqlLockProvider<D>,
    mut tx: sqlx::Transaction<'static, D::Database>,
    lock_name: &str,
    token: u64,
) -> Result<(), shedlock::Error> {
    provider.verify_lease(&mut tx, lock_name, token).await?;
    tx.commit().await.unwrap();
    Ok(())
}

/// A provider on `pool`, over `table`, as `holder`.
fn on_table<D: Dialect>(
    pool: sqlx::Pool<D::Database>,
    table: &str,
    holder: &str,
) -> SqlLockProvider<D> {
    SqlLockProvider::builder(pool)
        .table(table)
        .holder(holder)
        .build()
        .unwrap()
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
            let file = SqliteLockProvider::connect(&format!("sqlite://{}", path.display()))
                .await
                .unwrap();
            Provider::Sqlite(on_table(file.pool().clone(), &table, holder))
        }
        Db::Postgres => {
            let pool = sqlx::PgPool::connect(&pg_url()?).await.unwrap();
            Provider::Postgres(on_table(pool, &table, holder))
        }
        Db::MySql => {
            let pool = sqlx::MySqlPool::connect(&mysql_url()?).await.unwrap();
            Provider::MySql(on_table(pool, &table, holder))
        }
    };
    each!(&provider, p => p.create_schema().await.unwrap());
    Some(provider)
}

/// Another instance on the same table, with its own connections (so closing them cuts only it).
pub(crate) async fn another_instance(of: &Provider, holder: &str) -> Provider {
    map_each!(of, p => {
        let options = (*p.pool().connect_options()).clone();
        let pool = sqlx::Pool::connect_with(options).await.unwrap();
        on_table(pool, p.table(), holder)
    })
}

/// Another instance on the same table, connected to the server at `url` (e.g. through a
/// proxy); not for SQLite.
pub(crate) async fn instance_at(of: &Provider, url: &str, holder: &str) -> Provider {
    match of {
        Provider::Sqlite(_) => panic!("SQLite has no server URL"),
        Provider::Postgres(p) => {
            let pool = sqlx::PgPool::connect(url).await.unwrap();
            Provider::Postgres(on_table(pool, p.table(), holder))
        }
        Provider::MySql(p) => {
            let pool = sqlx::MySqlPool::connect(url).await.unwrap();
            Provider::MySql(on_table(pool, p.table(), holder))
        }
    }
}
