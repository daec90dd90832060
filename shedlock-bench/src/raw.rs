//! The bare sqlx loop: the providers' own statements (read from sqlx's statement log), bound
//! and run with nothing around them, the ceiling a provider on sqlx can reach.

use std::time::Duration;

use chrono::NaiveDateTime;
use shedlock::LockConfiguration;
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};

use crate::db::{Db, Dedicated, Pool};
use crate::statements::record;

/// The lease every benchmark takes, as each dialect binds it.
pub(crate) const LEASE: Duration = Duration::from_secs(300);
const LEASE_MICROS: i64 = 300_000_000;
const LEASE_MODIFIER: &str = "+300.000 seconds";
const NO_MINIMUM_MODIFIER: &str = "+0.000 seconds";

/// Where a raw worker sends its statements.
#[derive(Debug)]
pub(crate) enum Source {
    Pool(Pool),
    Dedicated(Dedicated),
}

/// The statements of an acquire + release pair, exactly as the provider sent them.
#[derive(Debug)]
pub(crate) struct RawSql {
    acquire: SqlStr,
    /// MySQL only: first use of a name.
    insert: Option<SqlStr>,
    /// MySQL only: the times of an acquired lease.
    lease_times: Option<SqlStr>,
    release: SqlStr,
}

// Macros rather than functions: the same statements on a pool and on a connection, which are
// different executor types (and a connection is reborrowed per statement).

/// A PostgreSQL or SQLite pair: the acquire returns the lease's row (token and times), the
/// release is one statement. What differs between the two is named at each use: how the dialect
/// binds the lease, "no acquisition window" and "no minimum", how the provider sends the release,
/// and, for SQLite, which acquire errors mean "not acquired this time".
macro_rules! returning_pair {
    (
        $sql:expr, $exec:expr, $name:expr, $holder:expr,
        lease: $lease:expr, no_window: $no_window:expr, no_minimum: $no_minimum:expr,
        release_by: $release_by:ident $(, busy: $busy:path)? $(,)?
    ) => {{
        let row: Result<Option<(i64, NaiveDateTime, NaiveDateTime)>, sqlx::Error> =
            sqlx::query_as($sql.acquire.clone())
                .bind($name)
                .bind($holder)
                .bind($lease)
                .bind($no_window)
                .fetch_optional($exec)
                .await;
        $(
            // As the provider: a busy database on acquire is "not acquired this time".
            let row = row.or_else(|e| if $busy(&e) { Ok(None) } else { Err(e) });
        )?
        let Some((token, _, _)) = row? else {
            return Ok(false);
        };
        sqlx::query($sql.release.clone())
            .bind($name)
            .bind($holder)
            .bind(token)
            .bind($no_minimum)
            .$release_by($exec)
            .await?;
        Ok(true)
    }};
}

macro_rules! pg_pair {
    ($sql:expr, $exec:expr, $name:expr, $holder:expr) => {
        returning_pair!(
            $sql, $exec, $name, $holder,
            lease: LEASE,
            no_window: Duration::ZERO,
            no_minimum: Duration::ZERO,
            release_by: fetch_optional,
        )
    };
}

/// The acquire of a MySQL pair, all its statements on one connection as the provider runs
/// them: the new token, or `None` when not acquired.
macro_rules! mysql_acquire {
    ($sql:expr, $exec:expr, $name:expr, $holder:expr) => {
        'acquire: {
            // The window (`unless_acquired_within`, 0 µs) appears four times.
            let updated = sqlx::query($sql.acquire.clone())
                .bind(0i64)
                .bind($holder)
                .bind(0i64)
                .bind(0i64)
                .bind(LEASE_MICROS)
                .bind(0i64)
                .bind(LEASE_MICROS)
                .bind($name)
                .execute($exec)
                .await?;
            let token = if updated.rows_affected() == 0 {
                let insert = $sql
                    .insert
                    .clone()
                    .unwrap_or_else(|| unreachable!("captured for MySQL"));
                let inserted = sqlx::query(insert)
                    .bind($name)
                    .bind(LEASE_MICROS)
                    .bind($holder)
                    .execute($exec)
                    .await?;
                if inserted.rows_affected() == 0 {
                    break 'acquire None;
                }
                1
            } else {
                match updated.last_insert_id() {
                    0 => break 'acquire None,
                    token => token as i64,
                }
            };
            let lease_times = $sql
                .lease_times
                .clone()
                .unwrap_or_else(|| unreachable!("captured for MySQL"));
            let times: Option<(NaiveDateTime, NaiveDateTime)> = sqlx::query_as(lease_times)
                .bind($name)
                .bind($holder)
                .bind(token)
                .fetch_optional($exec)
                .await?;
            times.map(|_| token)
        }
    };
}

macro_rules! mysql_release {
    ($sql:expr, $exec:expr, $name:expr, $holder:expr, $token:expr) => {
        sqlx::query($sql.release.clone())
            .bind(0i64)
            .bind($name)
            .bind($holder)
            .bind($token)
            .execute($exec)
            .await?
    };
}

macro_rules! sqlite_pair {
    ($sql:expr, $exec:expr, $name:expr, $holder:expr) => {
        returning_pair!(
            $sql, $exec, $name, $holder,
            lease: LEASE_MODIFIER,
            no_window: None::<String>,
            no_minimum: NO_MINIMUM_MODIFIER,
            release_by: execute,
            busy: is_busy,
        )
    };
}

impl RawSql {
    /// Records a provider on `pool` acquiring a new name of `table` and releasing it.
    pub(crate) async fn capture(db: Db, pool: &Pool, table: &str) -> anyhow::Result<Self> {
        let provider = pool.provider(table, "bench-capture", None)?;
        let name = format!("capture-{}-{}", std::process::id(), db.name());
        let config = LockConfiguration::new(name, LEASE, Duration::ZERO)?;
        let (lease, mut acquire) = record(provider.acquire(&config)).await;
        let lease = lease?.ok_or_else(|| anyhow::anyhow!("capture: lock not acquired"))?;
        let (released, release) = record(provider.release(&lease)).await;
        anyhow::ensure!(released?, "capture: lock not released");
        let sql = |text: String| AssertSqlSafe(text).into_sql_str();
        let expected = if db == Db::Mysql { 3 } else { 1 };
        anyhow::ensure!(
            acquire.len() == expected && release.len() == 1,
            "the {} provider's statements changed ({acquire:?}, {release:?}): update raw.rs",
            db.name()
        );
        let mut next = || sql(acquire.remove(0));
        Ok(RawSql {
            acquire: next(),
            insert: (db == Db::Mysql).then(&mut next),
            lease_times: (db == Db::Mysql).then(&mut next),
            release: sql(release.into_iter().next().unwrap_or_default()),
        })
    }

    /// Prints the statements, for the record.
    pub(crate) fn describe(&self) -> String {
        let mut text = format!("acquire: {}", self.acquire.as_str());
        for (label, sql) in [("insert", &self.insert), ("lease times", &self.lease_times)] {
            if let Some(sql) = sql {
                text += &format!("\n  {label}: {}", sql.as_str());
            }
        }
        text + &format!("\n  release: {}", self.release.as_str())
    }

    /// One attempt on `name`, and the release if it was acquired: what a provider's
    /// acquire + release do, minus the provider.
    pub(crate) async fn pair(
        &self,
        source: &mut Source,
        name: &str,
        holder: &str,
    ) -> Result<bool, sqlx::Error> {
        match source {
            Source::Pool(Pool::Pg(pool)) => pg_pair!(self, &*pool, name, holder),
            Source::Dedicated(Dedicated::Pg(conn)) => pg_pair!(self, &mut *conn, name, holder),
            Source::Pool(Pool::My(pool)) => {
                // One checkout per operation, as the provider does.
                let token = {
                    let mut conn = pool.acquire().await?;
                    mysql_acquire!(self, &mut *conn, name, holder)
                };
                let Some(token) = token else {
                    return Ok(false);
                };
                mysql_release!(self, &*pool, name, holder, token);
                Ok(true)
            }
            Source::Dedicated(Dedicated::My(conn)) => {
                let Some(token) = mysql_acquire!(self, &mut *conn, name, holder) else {
                    return Ok(false);
                };
                mysql_release!(self, &mut *conn, name, holder, token);
                Ok(true)
            }
            Source::Pool(Pool::Lite(pool)) => sqlite_pair!(self, &*pool, name, holder),
            Source::Dedicated(Dedicated::Lite(conn)) => {
                sqlite_pair!(self, &mut *conn, name, holder)
            }
        }
    }
}

/// `SQLITE_BUSY` or `SQLITE_LOCKED`, as the provider decides it.
fn is_busy(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|d| d.code()?.parse::<i32>().ok())
        .is_some_and(|code| matches!(code & 0xff, 5 | 6))
}
