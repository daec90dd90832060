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

use crate::runs::{Page, RunArgs, RunRow};
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

    /// An acquisition as acquire binds it: name, holder, the lease and the window as the
    /// dialect takes them, then its tick's bounds (`TickBounds`: tick, latest last tick,
    /// earliest clock).
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

    /// A run's start as the start statement binds it: lock, token, attempt, job, `tick` (a time
    /// or NULL, as the dialect holds times), holder, and its heartbeat `lease` or NULL.
    fn start_arguments(
        run: &RunArgs<'_>,
        tick: impl Param<Self>,
        lease: Option<impl Param<Self>>,
    ) -> Result<Self::Arguments, sqlx::Error>;

    /// A run's end as the end statement binds it: the run as for a start (without lease), then
    /// outcome and error.
    fn end_arguments(
        run: &RunArgs<'_>,
        tick: impl Param<Self>,
        outcome: &str,
        error: Option<&str>,
    ) -> Result<Self::Arguments, sqlx::Error>;

    /// A heartbeat as the alive statement binds it: lock, token, attempt and the lease.
    fn alive_arguments(
        run: &RunArgs<'_>,
        lease: impl Param<Self>,
    ) -> Result<Self::Arguments, sqlx::Error>;

    /// A page as the list statements bind it (numbered parameters): the lock if one, `since`
    /// and the cursor's time (as the dialect holds times), the cursor's token, attempt and
    /// lock, and the most rows.
    fn page_arguments(
        lock: Option<&str>,
        since: impl Param<Self>,
        before_time: impl Param<Self>,
        page: &Page,
    ) -> Result<Self::Arguments, sqlx::Error>;

    /// `lock`, bound `times` times.
    fn lock_argument(lock: &str, times: usize) -> Result<Self::Arguments, sqlx::Error>;

    /// The one row of two integers `sql` returns.
    fn flags<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a SqlStr,
        arguments: Self::Arguments,
    ) -> impl Future<Output = Result<(i64, i64), sqlx::Error>> + Send + 'a;

    /// Runs `sql`, which returns no rows: how many rows it matched.
    fn affected<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a SqlStr,
        arguments: Self::Arguments,
    ) -> impl Future<Output = Result<u64, sqlx::Error>> + Send + 'a;

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
    Option<i64>: Param<DB>,
    i32: Param<DB>,
    (NaiveDateTime,): for<'r> FromRow<'r, DB::Row>,
    RowParts: for<'r> FromRow<'r, DB::Row>,
    RunRow: for<'r> FromRow<'r, DB::Row>,
    (i64, i64): for<'r> FromRow<'r, DB::Row>,
    DB::QueryResult: Matched,
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
            a.add(acquire.name())?;
            a.add(acquire.holder)?;
            let tick = acquire.tick();
            a.add(lease)?;
            a.add(window)?;
            a.add(tick.tick)?;
            a.add(tick.latest_last)?;
            a.add(tick.earliest_now)
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

    fn start_arguments(
        run: &RunArgs<'_>,
        tick: impl Param<Self>,
        lease: Option<impl Param<Self>>,
    ) -> Result<Self::Arguments, sqlx::Error> {
        arguments::<Self>(|a| {
            add_run::<Self>(a, run, tick)?;
            match lease {
                Some(lease) => a.add(lease),
                None => a.add(None::<i64>),
            }
        })
    }

    fn end_arguments(
        run: &RunArgs<'_>,
        tick: impl Param<Self>,
        outcome: &str,
        error: Option<&str>,
    ) -> Result<Self::Arguments, sqlx::Error> {
        arguments::<Self>(|a| {
            add_run::<Self>(a, run, tick)?;
            a.add(outcome)?;
            a.add(error)
        })
    }

    fn alive_arguments(
        run: &RunArgs<'_>,
        lease: impl Param<Self>,
    ) -> Result<Self::Arguments, sqlx::Error> {
        arguments::<Self>(|a| {
            a.add(run.lock)?;
            a.add(run.token)?;
            a.add(run.attempt)?;
            a.add(lease)
        })
    }

    fn page_arguments(
        lock: Option<&str>,
        since: impl Param<Self>,
        before_time: impl Param<Self>,
        page: &Page,
    ) -> Result<Self::Arguments, sqlx::Error> {
        let (_, token, attempt, ref after) = page.before;
        arguments::<Self>(|a| {
            if let Some(lock) = lock {
                a.add(lock)?;
            }
            a.add(since)?;
            a.add(before_time)?;
            a.add(token)?;
            a.add(attempt)?;
            a.add(after.as_str())?;
            a.add(page.limit)
        })
    }

    fn lock_argument(lock: &str, times: usize) -> Result<Self::Arguments, sqlx::Error> {
        arguments::<Self>(|a| (0..times).try_for_each(|_| a.add(lock)))
    }

    async fn flags<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a SqlStr,
        arguments: Self::Arguments,
    ) -> Result<(i64, i64), sqlx::Error> {
        sqlx::query_as_with(sql.clone(), arguments)
            .fetch_one(connection)
            .await
    }

    async fn affected<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a SqlStr,
        arguments: Self::Arguments,
    ) -> Result<u64, sqlx::Error> {
        let done = sqlx::query_with(sql.clone(), arguments)
            .execute(connection)
            .await?;
        Ok(done.matched())
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

/// A statement's result: how many rows it matched.
pub trait Matched {
    /// Rows the statement matched (MySQL: found, as sqlx connects with `CLIENT_FOUND_ROWS`).
    fn matched(&self) -> u64;
}

#[cfg(feature = "postgres")]
impl Matched for sqlx::postgres::PgQueryResult {
    fn matched(&self) -> u64 {
        self.rows_affected()
    }
}

#[cfg(feature = "mysql")]
impl Matched for sqlx::mysql::MySqlQueryResult {
    fn matched(&self) -> u64 {
        self.rows_affected()
    }
}

#[cfg(feature = "sqlite")]
impl Matched for sqlx::sqlite::SqliteQueryResult {
    fn matched(&self) -> u64 {
        self.rows_affected()
    }
}

/// A run's key and start: lock, token, attempt, job, `tick`, holder.
fn add_run<DB: Database>(
    a: &mut DB::Arguments,
    run: &RunArgs<'_>,
    tick: impl Param<DB>,
) -> Result<(), BoxDynError>
where
    for<'q> &'q str: Encode<'q, DB> + Type<DB>,
    i64: Param<DB>,
    i32: Param<DB>,
{
    a.add(run.lock)?;
    a.add(run.token)?;
    a.add(run.attempt)?;
    a.add(run.job)?;
    a.add(tick)?;
    a.add(run.holder)
}

/// Arguments added by `add`; an encoding failure is reported as `bind` reports it.
fn arguments<DB: Database>(
    add: impl FnOnce(&mut DB::Arguments) -> Result<(), BoxDynError>,
) -> Result<DB::Arguments, sqlx::Error> {
    let mut arguments = DB::Arguments::default();
    add(&mut arguments).map_err(sqlx::Error::Encode)?;
    Ok(arguments)
}
