//! The seam between the provider, written once, and each database: SQL text, column types,
//! how parameters are bound and how the row and the fencing token come back.
//!
//! A dialect is a marker type implementing [`Dialect`]; everything else (builder, connection
//! handling, retries, error mapping, fencing checks, inspection) lives in
//! [`SqlLockProvider`](super::SqlLockProvider). A new SQL database is one module implementing
//! this trait, plus one line registering it with the test suite.

use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDateTime;
use shedlock_core::{Error, LockConfiguration};
use sqlx::{Database, Pool, SqlStr};
use tokio::sync::broadcast;

use crate::{RowParts, Table, trusted_sql};

mod driver;
#[cfg(feature = "mysql")]
pub(crate) mod mysql;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
mod runs;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;

#[cfg(feature = "mysql")]
pub use mysql::MySql;
#[cfg(feature = "postgres")]
pub use postgres::Pg;
#[cfg(feature = "sqlite")]
pub use sqlite::Sqlite;

pub(crate) use driver::{Driver, Param};
pub use runs::{Ending, RunDialect, RunStatements};

/// Connections of its own a provider on a database server may open by default: enough for 32
/// lock statements at the same moment, which is where the server's throughput stops growing
/// on the benchmark machine (`BENCHMARKS.md`); idle ones close after a minute.
pub(crate) const DEFAULT_DEDICATED_CONNECTIONS: usize = 32;

/// A connection of a dialect's database.
pub(crate) type Connection<D> = <<D as Dialect>::Database as Database>::Connection;

/// One database's SQL behind [`SqlLockProvider`](crate::SqlLockProvider): implemented by
/// [`Pg`], [`MySql`] and
/// [`Sqlite`], and sealed: its methods are the crate's business.
///
/// Every method runs statements prepared once by [`statements`](Self::statements) and returns
/// sqlx's error untouched; the provider maps errors, retries serialization failures and decides
/// what a connection failure means. Where the dialects run a statement the same way, the method
/// is written once, here.
pub trait Dialect: sealed::Sealed + Debug + Send + Sync + Sized + 'static {
    /// The sqlx database driver, with its board statements (`crate::board`).
    type Database: Driver + crate::board::BoardDriver;
    /// The statements of one provider only this dialect has.
    #[doc(hidden)]
    type OwnStatements: Debug + Send + Sync;
    /// Builder settings only this dialect has.
    #[doc(hidden)]
    type Options: Debug + Default + Clone + Send + Sync;
    /// Run-time state only this dialect has, shared by a provider's clones.
    #[doc(hidden)]
    type State: Debug + Send + Sync;

    /// The lock table's column types (as in `sql/<dialect>.sql`).
    #[doc(hidden)]
    const COLUMN_TYPES: ColumnTypes;

    /// The database clock now, in UTC, as the statements read it: an SQL expression.
    #[doc(hidden)]
    const NOW: &'static str;

    #[doc(hidden)]
    fn statements(table: &Table) -> Statements<Self::OwnStatements>;

    /// Checks the dialect's builder settings and sets up its state.
    #[doc(hidden)]
    fn state(options: Self::Options, table: &Table) -> Result<Self::State, Error>;

    /// The pool `connect(url)` opens: set up for lock statements (on a server, one that does
    /// not ping the connections it hands out).
    #[doc(hidden)]
    fn connect(
        url: &str,
    ) -> impl Future<Output = Result<Pool<Self::Database>, sqlx::Error>> + Send {
        <Self::Database as Driver>::connect(url)
    }

    /// How many connections of its own a provider may open by default on `pool`.
    #[doc(hidden)]
    fn default_dedicated_connections(_pool: &Pool<Self::Database>) -> usize {
        DEFAULT_DEDICATED_CONNECTIONS
    }

    /// Takes the lock if it is free (and not acquired within `window`).
    #[doc(hidden)]
    fn acquire<'a>(
        connection: &'a mut Connection<Self>,
        sql: &'a Statements<Self::OwnStatements>,
        args: Acquire<'a>,
    ) -> impl Future<Output = Result<Option<Acquired>, sqlx::Error>> + Send + 'a;

    /// Most acquisitions [`acquire_batch`](Self::acquire_batch) may send as one statement;
    /// 1: acquisitions are never batched.
    #[doc(hidden)]
    const MAX_ACQUIRE_BATCH: usize = 1;

    /// Takes each lock that is free (and not acquired within its window), as `holder`, in as
    /// few statements as the database allows; the names are distinct and sorted (rows are
    /// locked in that order, so that concurrent batches never deadlock). Returns the locks
    /// taken, by name. Reads each window when binding it, like [`acquire`](Self::acquire).
    #[doc(hidden)]
    fn acquire_batch<'a>(
        connection: &'a mut Connection<Self>,
        sql: &'a Statements<Self::OwnStatements>,
        holder: &'a str,
        configs: impl Iterator<Item = &'a LockConfiguration> + Send + 'a,
    ) -> impl Future<Output = Result<Vec<(String, Acquired)>, sqlx::Error>> + Send + 'a {
        async move {
            let mut won = Vec::new();
            for config in configs {
                let args = Acquire { holder, config };
                if let Some(acquired) = Self::acquire(&mut *connection, sql, args).await? {
                    won.push((config.name().to_owned(), acquired));
                }
            }
            Ok(won)
        }
    }

    /// Ends the lease (keeping it until `locked_at + duration`): whether it was ours and live.
    #[doc(hidden)]
    fn release<'a>(
        connection: &'a mut Connection<Self>,
        sql: &'a Statements<Self::OwnStatements>,
        state: &'a Self::State,
        args: Lease<'a>,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send + 'a;

    /// Most releases [`release_batch`](Self::release_batch) sends as one statement; 1:
    /// releases are never batched.
    #[doc(hidden)]
    const MAX_RELEASE_BATCH: usize = 1;

    /// Ends each lease of `leases` (distinct names, one holder) as
    /// [`release`](Self::release) does, in as few statements as the database allows: the
    /// names released. `None` when this provider's releases must go one by one now (a release
    /// that notifies, on PostgreSQL).
    #[doc(hidden)]
    fn release_batch<'a>(
        connection: &'a mut Connection<Self>,
        sql: &'a Statements<Self::OwnStatements>,
        state: &'a Self::State,
        leases: &'a [Lease<'a>],
    ) -> impl Future<Output = Result<Option<Vec<String>>, sqlx::Error>> + Send + 'a {
        let _ = (connection, sql, state, leases);
        std::future::ready(Ok(None))
    }

    /// Moves the lease's end to `now + duration`: the new `lock_until` if it was ours and live.
    #[doc(hidden)]
    fn extend<'a>(
        connection: &'a mut Connection<Self>,
        sql: &'a Statements<Self::OwnStatements>,
        args: Lease<'a>,
    ) -> impl Future<Output = Result<Option<NaiveDateTime>, sqlx::Error>> + Send + 'a;

    /// Inside the caller's transaction: whether `(name, holder, token)` is the live lease,
    /// locking its row against takeover until the transaction ends.
    #[doc(hidden)]
    fn verify<'a>(
        connection: &'a mut Connection<Self>,
        sql: &'a Statements<Self::OwnStatements>,
        name: &'a str,
        holder: &'a str,
        token: i64,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send + 'a {
        <Self::Database as Driver>::returns_row(connection, &sql.verify, name, holder, token)
    }

    /// Rows of the lock table: one lock's, or all by name.
    #[doc(hidden)]
    fn read_rows<'a>(
        pool: &'a Pool<Self::Database>,
        sql: &'a Statements<Self::OwnStatements>,
        name: Option<&'a str>,
    ) -> impl Future<Output = Result<Vec<RowParts>, sqlx::Error>> + Send + 'a {
        let rows = if name.is_some() {
            &sql.lock_state
        } else {
            &sql.list_locks
        };
        <Self::Database as Driver>::lock_rows(pool, rows, name)
    }

    /// Creates the table if missing and adds each of [`Table::added_columns`] that is
    /// missing; idempotent and safe to run concurrently.
    #[doc(hidden)]
    fn create_schema<'a>(
        pool: &'a Pool<Self::Database>,
        table: &'a Table,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a;

    /// The database clock now, in UTC, as the lock statements read it.
    #[doc(hidden)]
    fn database_time(
        pool: &Pool<Self::Database>,
    ) -> impl Future<Output = Result<NaiveDateTime, sqlx::Error>> + Send + '_ {
        <Self::Database as Driver>::time(pool, trusted_sql(format!("SELECT {}", Self::NOW)))
    }

    /// The table's columns as the catalog describes them; none when the table does not exist.
    #[doc(hidden)]
    fn table_columns<'a>(
        pool: &'a Pool<Self::Database>,
        table: &'a Table,
    ) -> impl Future<Output = Result<Vec<CatalogColumn>, sqlx::Error>> + Send + 'a;

    /// Whether a column of the catalog's (lower-case) `found` type holds what the statements
    /// write into a column of this kind, and reads back as they expect.
    #[doc(hidden)]
    fn type_fits(kind: ColumnKind, found: &str) -> bool;

    /// The run-record statements and queries of this dialect.
    #[doc(hidden)]
    type Runs: RunDialect<Database = Self::Database>;

    /// Whether an acquire that failed with this error means "not acquired this time" (SQLite
    /// busy), rather than a store error.
    #[doc(hidden)]
    fn is_busy(_error: &sqlx::Error) -> bool {
        false
    }

    /// Names of released locks, where the database can tell.
    #[doc(hidden)]
    fn release_hints(
        _pool: &Pool<Self::Database>,
        _state: &Self::State,
    ) -> Option<broadcast::Receiver<Arc<str>>> {
        None
    }
}

/// An acquisition attempt's parameters.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Acquire<'a> {
    pub(crate) holder: &'a str,
    /// The lock, as the caller's validated configuration has it: name, lease and acquisition
    /// window are read from it, never carried beside it.
    pub(crate) config: &'a LockConfiguration,
}

impl Acquire<'_> {
    /// The lock's name.
    pub(crate) fn name(&self) -> &str {
        self.config.name()
    }

    /// The lease to grant.
    pub(crate) fn lock_at_most_for(&self) -> Duration {
        self.config.lock_at_most_for()
    }

    /// Refuse when the last acquisition is more recent than this (zero: no condition). Read it
    /// when binding, after any wait for a connection: a tick's window grows while it waits.
    pub(crate) fn window(&self) -> Duration {
        self.config.acquired_within_window()
    }

    /// The tick claimed, if any, as the statements bind it.
    pub(crate) fn tick(&self) -> TickBounds {
        TickBounds::of(self.config)
    }
}

/// A tick claim ([`LockConfiguration::tick`]) as the acquire statements bind it, in
/// milliseconds since 1970. Granted only if the row's last tick is NULL or at most
/// `latest_last` (`tick - spacing`) and the database clock at least `earliest_now`
/// (`tick - ahead`); a grant keeps `tick` as the last tick (NULL: keeps the row's). Without a
/// tick, bounds every row passes, so one statement serves both kinds of acquisition and the
/// last tick is neither checked nor changed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TickBounds {
    pub(crate) tick: Option<i64>,
    pub(crate) latest_last: i64,
    pub(crate) earliest_now: i64,
}

impl TickBounds {
    pub(crate) fn of(config: &LockConfiguration) -> Self {
        match config.tick() {
            // Saturating: a tick within `spacing` of the least i64 (none a clock gives) would
            // follow a last tick of exactly that.
            Some(tick) => TickBounds {
                tick: Some(tick.millis()),
                latest_last: tick.millis().saturating_sub(tick.spacing_millis()),
                earliest_now: tick.millis().saturating_sub(tick.ahead_millis()),
            },
            None => TickBounds {
                tick: None,
                latest_last: i64::MAX,
                earliest_now: i64::MIN,
            },
        }
    }
}

/// A lease to release or extend, and the duration that operation applies.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Lease<'a> {
    pub(crate) name: &'a str,
    pub(crate) holder: &'a str,
    pub(crate) token: i64,
    /// Release: `lock_at_least_for`; extend: the new `lock_at_most_for`.
    pub(crate) duration: Duration,
}

/// What a successful acquisition wrote: the new token and the lease's times (UTC).
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct Acquired {
    pub(crate) token: i64,
    pub(crate) locked_at: NaiveDateTime,
    pub(crate) lock_until: NaiveDateTime,
}

/// The row an acquire statement returns: token, `locked_at`, `lock_until`.
pub(crate) type AcquiredRow = (i64, NaiveDateTime, NaiveDateTime);

impl From<AcquiredRow> for Acquired {
    fn from((token, locked_at, lock_until): AcquiredRow) -> Self {
        Self {
            token,
            locked_at,
            lock_until,
        }
    }
}

/// One statement per provider operation, built once per provider from the validated table:
/// those every dialect has, and `own`, those only its dialect has. Each dialect's
/// `statements` says what its statements bind and return.
#[doc(hidden)]
#[derive(Debug)]
pub struct Statements<Own = ()> {
    /// Takes the lock if it is free (and not acquired within the window).
    acquire: SqlStr,
    /// Ends a lease, keeping it for `lock_at_least_for`.
    release: SqlStr,
    /// Moves a lease's end.
    extend: SqlStr,
    /// The fencing guard: name, holder, token; whether that lease is live, locking its row
    /// until the caller's transaction ends.
    verify: SqlStr,
    /// The name: that lock's row, as [`RowParts`].
    lock_state: SqlStr,
    /// Every row, by name, as [`RowParts`].
    list_locks: SqlStr,
    /// The dialect's own.
    #[cfg_attr(not(any(feature = "postgres", feature = "mysql")), allow(dead_code))]
    own: Own,
}

/// The table's name and its columns' (lock name, `lock_until`, `locked_at`, `locked_by`,
/// fencing token, last tick): the identifiers the statements are written with.
pub(crate) fn identifiers(table: &Table) -> [&str; 7] {
    let c = &table.columns;
    [
        &table.name,
        &c.name,
        &c.lock_until,
        &c.locked_at,
        &c.locked_by,
        &c.fencing_token,
        &c.last_tick,
    ]
}

/// Ends a transaction by its statements' `outcome`: committed after they succeeded, rolled
/// back at once after one failed. Dropped, sqlx would only queue the rollback (MySQL sends it
/// with the connection's next statement), and the transaction's row locks, or SQLite's write
/// lock, would stay taken while the connection sat idle.
#[cfg_attr(not(feature = "mysql"), allow(dead_code))]
pub(crate) async fn finish<DB: Database, T>(
    transaction: sqlx::Transaction<'_, DB>,
    outcome: Result<T, sqlx::Error>,
) -> Result<T, sqlx::Error> {
    match outcome {
        Ok(value) => transaction.commit().await.map(|()| value),
        Err(e) => {
            // The statement's error is the one to report; a rollback that fails too leaves
            // a connection that is closed as broken.
            let _ = transaction.rollback().await;
            Err(e)
        }
    }
}

/// `ALTER TABLE` adding `column` with its `definition` (one of
/// [`Table::added_columns`]) to a table made without it, by `add_column` (`ADD COLUMN`, or
/// `ADD COLUMN IF NOT EXISTS` where the database has it).
pub(crate) fn add_column(
    table: &Table,
    add_column: &str,
    column: &str,
    definition: &str,
) -> SqlStr {
    trusted_sql(format!(
        "ALTER TABLE {} {add_column} {column} {definition}",
        table.name
    ))
}

/// A dialect's column types for the lock table.
#[doc(hidden)]
#[derive(Debug)]
pub struct ColumnTypes {
    pub(crate) name: &'static str,
    pub(crate) time: &'static str,
    pub(crate) token: &'static str,
}

/// A column as the database's catalog describes it: name and type in lower case, and whether
/// it is, alone, the table's primary key or a unique key (what `ON CONFLICT` and
/// `INSERT IGNORE` rely on).
pub(crate) type CatalogColumn = (String, String, bool);

/// What a column of the lock table holds, for checking a table's types.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColumnKind {
    /// The lock name or the holder: text.
    Text,
    /// `lock_until`, `locked_at`: a UTC time with milliseconds.
    Time,
    /// The fencing token, the last tick: a 64-bit integer.
    Integer,
}

pub(crate) mod sealed {
    /// Only this crate's dialects implement [`Dialect`](super::Dialect).
    pub trait Sealed {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ColumnNames;
    use shedlock_core::{DEFAULT_RUN_RETENTION, DEFAULT_RUNS_PER_LOCK};

    use crate::runs::RunTable;

    /// `sql/<dialect>.sql` holds what `create_schema` creates for the default names: the lock
    /// table and the run table.
    fn assert_sql_file_holds<D: Dialect>(file: &str) {
        let table = Table {
            name: "shedlock".into(),
            columns: ColumnNames::default(),
        };
        let runs = RunTable {
            name: "shedlock_runs".into(),
            retention: DEFAULT_RUN_RETENTION,
            per_lock: DEFAULT_RUNS_PER_LOCK,
        };
        for generated in [
            table.create_table_sql(&D::COLUMN_TYPES),
            <D::Runs as RunDialect>::create_sql(&runs),
        ] {
            assert!(
                file.contains(&generated),
                "{file}\ndiffers from:\n{generated}"
            );
        }
    }

    #[test]
    fn sql_files_match_the_generated_tables() {
        #[cfg(feature = "postgres")]
        assert_sql_file_holds::<Pg>(include_str!("../../sql/postgres.sql"));
        #[cfg(feature = "mysql")]
        assert_sql_file_holds::<MySql>(include_str!("../../sql/mysql.sql"));
        #[cfg(feature = "sqlite")]
        assert_sql_file_holds::<Sqlite>(include_str!("../../sql/sqlite.sql"));
    }
}
