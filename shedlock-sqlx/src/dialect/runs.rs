//! The run records' side of the dialect seam: the statements each dialect writes, and how they
//! run, once for all (MySQL, which cannot return a row from a write, runs three of its own).

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use chrono::NaiveDateTime;
use sqlx::{Database, Pool, SqlStr};

use super::{Driver, Param};
use crate::runs::{RunArgs, RunRow, RunTable};
use crate::single;

/// The run statements of one provider, built once from the run table: those every dialect
/// has, and `own`, those only its dialect has. What they bind: `started` and `finished` a run
/// ([`Driver::run_arguments`]), `list` a lock or NULL, a time or NULL and a limit, `trim` a
/// lock, the rows kept and the retention (MySQL: see its `runs` module).
#[doc(hidden)]
#[derive(Debug)]
pub struct RunStatements<Own = ()> {
    /// Records a run's start; nothing is written when its row exists. Returns the row.
    pub(super) started: SqlStr,
    /// Records a run's end on its row if still running, or the whole run when it has none.
    pub(super) finished: SqlStr,
    /// The rows of a query, newest first.
    pub(super) list: SqlStr,
    /// Deletes a lock's rows past its newest `per_lock`, and every row past the retention.
    pub(super) trim: SqlStr,
    /// The dialect's own.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(super) own: Own,
}

/// The run records of a dialect: a second table beside the lock table, one write to start a
/// run and one to end it. Implemented once per dialect, in its `runs` module; not public API.
#[doc(hidden)]
pub trait RunDialect: Send + Sync + 'static {
    /// The driver's database.
    type Database: Driver;

    /// The run statements only this dialect has.
    type OwnStatements: Debug + Send + Sync;

    /// A time or NULL as the run table holds it.
    type Time: Param<Self::Database>;

    /// The retention as the trim statement binds it.
    type Retention: Param<Self::Database>;

    /// `time` as [`Time`](Self::Time).
    fn time(time: Option<NaiveDateTime>) -> Self::Time;

    /// `retention` as [`Retention`](Self::Retention).
    fn retention(retention: Duration) -> Self::Retention;

    /// Builds the statements.
    fn statements(table: &RunTable) -> RunStatements<Self::OwnStatements>;

    /// `CREATE TABLE IF NOT EXISTS` (and its index) for the run table.
    fn create_sql(table: &RunTable) -> String;

    /// Creates the run table (and its index) if missing.
    fn create<'a>(
        pool: &'a Pool<Self::Database>,
        table: &'a RunTable,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a;

    /// Records a run's start (nothing when it exists) and returns its row, read to the end
    /// (`single`): a start whose commit failed is no start.
    fn started<'a>(
        connection: &'a mut <Self::Database as Database>::Connection,
        sql: &'a RunStatements<Self::OwnStatements>,
        args: RunArgs<'a>,
    ) -> impl Future<Output = Result<RunRow, sqlx::Error>> + Send + 'a {
        async move {
            let run = Self::Database::run_arguments(&args, Self::time(args.tick), None)?;
            let rows = Self::Database::run_rows(connection, &sql.started, run).await?;
            single(rows)?
                .ok_or_else(|| sqlx::Error::Protocol("the run upsert returned no row".into()))
        }
    }

    /// Records a run's end on its row if still running, or the whole run when it has none.
    fn finished<'a>(
        connection: &'a mut <Self::Database as Database>::Connection,
        sql: &'a RunStatements<Self::OwnStatements>,
        args: RunArgs<'a>,
        outcome: &'a str,
        error: Option<&'a str>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a {
        async move {
            let tick = Self::time(args.tick);
            let run = Self::Database::run_arguments(&args, tick, Some((outcome, error)))?;
            Self::Database::execute(connection, &sql.finished, run).await
        }
    }

    /// The run rows of a query, newest first.
    fn list<'a>(
        pool: &'a Pool<Self::Database>,
        sql: &'a RunStatements<Self::OwnStatements>,
        lock: Option<&'a str>,
        since: Option<NaiveDateTime>,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<RunRow>, sqlx::Error>> + Send + 'a {
        async move {
            let query = Self::Database::query_arguments(lock, Self::time(since), limit)?;
            Self::Database::run_rows(&mut *pool.acquire().await?, &sql.list, query).await
        }
    }

    /// Deletes the run rows of `lock` past its newest `per_lock`, and every row older than the
    /// retention.
    fn trim<'a>(
        pool: &'a Pool<Self::Database>,
        sql: &'a RunStatements<Self::OwnStatements>,
        table: &'a RunTable,
        lock: &'a str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a {
        async move {
            let retention = Self::retention(table.retention);
            let kept = Self::Database::trim_arguments(lock, table.per_lock, retention)?;
            Self::Database::execute(&mut *pool.acquire().await?, &sql.trim, kept).await
        }
    }
}

/// The run table of the dialects whose DDL differs only in `types`, aligned as in `sql/`, and
/// its `index` statement.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) fn aligned_run_table_sql(
    table: &str,
    types: &super::ColumnTypes,
    index: &str,
) -> String {
    let super::ColumnTypes { name, time, token } = types;
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (\n    \
         lock_name     {name:<13} NOT NULL,\n    \
         fencing_token {token:<13} NOT NULL,\n    \
         attempt       INTEGER       NOT NULL,\n    \
         job           VARCHAR(255)  NOT NULL,\n    \
         tick          {time},\n    \
         holder        VARCHAR(255)  NOT NULL,\n    \
         started_at    {time:<13} NOT NULL,\n    \
         finished_at   {time},\n    \
         outcome       VARCHAR(16)   NOT NULL,\n    \
         error         VARCHAR(2000),\n    \
         PRIMARY KEY (lock_name, fencing_token, attempt)\n);\n\
         {index}"
    )
}
