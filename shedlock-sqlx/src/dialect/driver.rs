//! What the dialects run the same way, written once over sqlx's generic API: the databases
//! differ in their SQL text and in how they hold times and durations, not in how these
//! statements are bound and read.

use std::future::Future;

use chrono::NaiveDateTime;
use sqlx::pool::PoolOptions;
use sqlx::{
    Arguments, Database, Encode, Executor, FromRow, IntoArguments, Pool, SqlStr, Type,
    error::BoxDynError,
};

use crate::runs::{RunArgs, RunRow};
use crate::{Acquire, Lease, RowParts, single};

/// A value the dialects bind: encodable for the driver `DB`.
pub trait Param<DB: Database>: for<'q> Encode<'q, DB> + Type<DB> + Send + Sync + 'static {}

impl<DB: Database, T> Param<DB> for T where
    T: for<'q> Encode<'q, DB> + Type<DB> + Send + Sync + 'static
{
}

/// An sqlx driver, with the statement code the dialects share. Implemented for every driver
/// that binds and reads the lock and run tables' types; not public API.
pub trait Driver: Database {
    /// A pool that does not ping the connections it hands out.
    fn connect(url: &str) -> impl Future<Output = Result<Pool<Self>, sqlx::Error>> + Send;

    /// The lock rows `sql` returns, bound to `name` if there is one.
    fn lock_rows<'a>(
        pool: &'a Pool<Self>,
        sql: &'a SqlStr,
        name: Option<&'a str>,
    ) -> impl Future<Output = Result<Vec<RowParts>, sqlx::Error>> + Send + 'a;

    /// Whether `sql`, bound to a lease's name, holder and token, returns a row.
    fn returns_row<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a SqlStr,
        name: &'a str,
        holder: &'a str,
        token: i64,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send + 'a;

    /// The one time `sql` returns.
    fn time(
        pool: &Pool<Self>,
        sql: SqlStr,
    ) -> impl Future<Output = Result<NaiveDateTime, sqlx::Error>> + Send + '_;

    /// The one row `sql` returns, if any, read to the end (`crate::single`): an autocommit
    /// statement commits after its rows, and only the step that reaches the end reports a
    /// commit that failed.
    fn single_row<'a, O>(
        connection: &'a mut Self::Connection,
        sql: &'a SqlStr,
        arguments: Self::Arguments,
    ) -> impl Future<Output = Result<Option<O>, sqlx::Error>> + Send + 'a
    where
        O: for<'r> FromRow<'r, Self::Row> + Send + Unpin + 'a;

    /// An acquisition as acquire binds it: name, holder, and the lease and the window as the
    /// dialect takes them.
    fn acquire_arguments(
        acquire: &Acquire<'_>,
        lease: impl Param<Self>,
        window: impl Param<Self>,
    ) -> Result<Self::Arguments, sqlx::Error>;

    /// A lease as release and extend bind it: name, holder, token, and `duration` as the
    /// dialect takes it.
    fn lease_arguments(
        lease: &Lease<'_>,
        duration: impl Param<Self>,
    ) -> Result<Self::Arguments, sqlx::Error>;

    /// A run as the run statements bind it: lock, token, attempt, job, `tick` (a time or NULL,
    /// as the dialect holds times) and holder, then its `end` (outcome, error) if given.
    fn run_arguments(
        run: &RunArgs<'_>,
        tick: impl Param<Self>,
        end: Option<(&str, Option<&str>)>,
    ) -> Result<Self::Arguments, sqlx::Error>;

    /// A query of the run rows as the list statements bind it: a lock or NULL, `since` (a time
    /// or NULL, as the dialect holds times), and the most rows.
    fn query_arguments(
        lock: Option<&str>,
        since: impl Param<Self>,
        limit: i64,
    ) -> Result<Self::Arguments, sqlx::Error>;

    /// What a trim statement binds: the lock, how many of its rows to keep, and the retention
    /// as the dialect takes it.
    fn trim_arguments(
        lock: &str,
        per_lock: u32,
        retention: impl Param<Self>,
    ) -> Result<Self::Arguments, sqlx::Error>;

    /// The run rows `sql` returns, read to the end.
    fn run_rows<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a SqlStr,
        arguments: Self::Arguments,
    ) -> impl Future<Output = Result<Vec<RunRow>, sqlx::Error>> + Send + 'a;

    /// Runs `sql`, which returns no rows.
    fn execute<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a SqlStr,
        arguments: Self::Arguments,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a;
}

impl<DB> Driver for DB
where
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    for<'q> Option<&'q str>: Encode<'q, DB> + Type<DB>,
    i64: Param<DB>,
    i32: Param<DB>,
    (NaiveDateTime,): for<'r> FromRow<'r, DB::Row>,
    RowParts: for<'r> FromRow<'r, DB::Row>,
    RunRow: for<'r> FromRow<'r, DB::Row>,
{
    async fn connect(url: &str) -> Result<Pool<Self>, sqlx::Error> {
        PoolOptions::new()
            .test_before_acquire(false)
            .connect(url)
            .await
    }

    async fn lock_rows<'a>(
        pool: &'a Pool<Self>,
        sql: &'a SqlStr,
        name: Option<&'a str>,
    ) -> Result<Vec<RowParts>, sqlx::Error> {
        let query = sqlx::query_as(sql.clone());
        match name {
            Some(name) => query.bind(name),
            None => query,
        }
        .fetch_all(pool)
        .await
    }

    async fn returns_row<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a SqlStr,
        name: &'a str,
        holder: &'a str,
        token: i64,
    ) -> Result<bool, sqlx::Error> {
        let row = sqlx::query(sql.clone())
            .bind(name)
            .bind(holder)
            .bind(token)
            .fetch_optional(connection)
            .await?;
        Ok(row.is_some())
    }

    async fn time(pool: &Pool<Self>, sql: SqlStr) -> Result<NaiveDateTime, sqlx::Error> {
        sqlx::query_scalar(sql).fetch_one(pool).await
    }

    async fn single_row<'a, O>(
        connection: &'a mut Self::Connection,
        sql: &'a SqlStr,
        arguments: Self::Arguments,
    ) -> Result<Option<O>, sqlx::Error>
    where
        O: for<'r> FromRow<'r, Self::Row> + Send + Unpin + 'a,
    {
        let rows = sqlx::query_as_with(sql.clone(), arguments)
            .fetch_all(connection)
            .await?;
        single(rows)
    }

    fn acquire_arguments(
        acquire: &Acquire<'_>,
        lease: impl Param<Self>,
        window: impl Param<Self>,
    ) -> Result<Self::Arguments, sqlx::Error> {
        arguments::<Self>(|a| {
            a.add(acquire.name)?;
            a.add(acquire.holder)?;
            a.add(lease)?;
            a.add(window)
        })
    }

    fn lease_arguments(
        lease: &Lease<'_>,
        duration: impl Param<Self>,
    ) -> Result<Self::Arguments, sqlx::Error> {
        arguments::<Self>(|a| {
            a.add(lease.name)?;
            a.add(lease.holder)?;
            a.add(lease.token)?;
            a.add(duration)
        })
    }

    fn run_arguments(
        run: &RunArgs<'_>,
        tick: impl Param<Self>,
        end: Option<(&str, Option<&str>)>,
    ) -> Result<Self::Arguments, sqlx::Error> {
        arguments::<Self>(|a| {
            a.add(run.lock)?;
            a.add(run.token)?;
            a.add(run.attempt)?;
            a.add(run.job)?;
            a.add(tick)?;
            a.add(run.holder)?;
            if let Some((outcome, error)) = end {
                a.add(outcome)?;
                a.add(error)?;
            }
            Ok(())
        })
    }

    fn query_arguments(
        lock: Option<&str>,
        since: impl Param<Self>,
        limit: i64,
    ) -> Result<Self::Arguments, sqlx::Error> {
        arguments::<Self>(|a| {
            a.add(lock)?;
            a.add(since)?;
            a.add(limit)
        })
    }

    fn trim_arguments(
        lock: &str,
        per_lock: u32,
        retention: impl Param<Self>,
    ) -> Result<Self::Arguments, sqlx::Error> {
        arguments::<Self>(|a| {
            a.add(lock)?;
            a.add(i64::from(per_lock))?;
            a.add(retention)
        })
    }

    async fn run_rows<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a SqlStr,
        arguments: Self::Arguments,
    ) -> Result<Vec<RunRow>, sqlx::Error> {
        sqlx::query_as_with(sql.clone(), arguments)
            .fetch_all(connection)
            .await
    }

    async fn execute<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a SqlStr,
        arguments: Self::Arguments,
    ) -> Result<(), sqlx::Error> {
        sqlx::query_with(sql.clone(), arguments)
            .execute(connection)
            .await
            .map(drop)
    }
}

/// Arguments added by `add`; an encoding failure is reported as `bind` reports it.
fn arguments<DB: Database>(
    add: impl FnOnce(&mut DB::Arguments) -> Result<(), BoxDynError>,
) -> Result<DB::Arguments, sqlx::Error> {
    let mut arguments = DB::Arguments::default();
    add(&mut arguments).map_err(sqlx::Error::Encode)?;
    Ok(arguments)
}
