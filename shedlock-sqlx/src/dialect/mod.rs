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
use sqlx::{Database, Pool};
use tokio::sync::broadcast;

use crate::runs::{RunArgs, RunRow, RunTable};
use crate::{RowParts, Table};

#[cfg(feature = "mysql")]
pub(crate) mod mysql;
#[cfg(feature = "postgres")]
pub(crate) mod postgres;
#[cfg(feature = "sqlite")]
pub(crate) mod sqlite;

#[cfg(feature = "mysql")]
pub use mysql::MySql;
#[cfg(feature = "postgres")]
pub use postgres::Pg;
#[cfg(feature = "sqlite")]
pub use sqlite::Sqlite;

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
/// what a connection failure means.
pub trait Dialect: sealed::Sealed + Debug + Send + Sync + Sized + 'static {
    /// The sqlx database driver.
    type Database: Database;
    /// The statements of one provider, built once from its table.
    #[doc(hidden)]
    type Statements: Debug + Send + Sync;
    /// Builder settings only this dialect has.
    #[doc(hidden)]
    type Options: Debug + Default + Clone + Send + Sync;
    /// Run-time state only this dialect has, shared by a provider's clones.
    #[doc(hidden)]
    type State: Debug + Send + Sync;

    /// The lock table's column types (as in `sql/<dialect>.sql`).
    #[doc(hidden)]
    const COLUMN_TYPES: ColumnTypes;

    #[doc(hidden)]
    fn statements(table: &Table) -> Self::Statements;

    /// Checks the dialect's builder settings and sets up its state.
    #[doc(hidden)]
    fn state(options: Self::Options, table: &Table) -> Result<Self::State, Error>;

    /// The pool `connect(url)` opens: set up for lock statements.
    #[doc(hidden)]
    fn connect(url: &str)
    -> impl Future<Output = Result<Pool<Self::Database>, sqlx::Error>> + Send;

    /// How many connections of its own a provider may open by default on `pool`.
    #[doc(hidden)]
    fn default_dedicated_connections(_pool: &Pool<Self::Database>) -> usize {
        DEFAULT_DEDICATED_CONNECTIONS
    }

    /// Takes the lock if it is free (and not acquired within `window`).
    #[doc(hidden)]
    fn acquire<'a>(
        connection: &'a mut Connection<Self>,
        sql: &'a Self::Statements,
        args: Acquire<'a>,
    ) -> impl Future<Output = Result<Option<Acquired>, sqlx::Error>> + Send + 'a;

    /// Most acquisitions [`acquire_batch`](Self::acquire_batch) may send as one statement;
    /// 1: acquisitions are never batched.
    #[doc(hidden)]
    const MAX_ACQUIRE_BATCH: usize = 1;

    /// Takes each lock that is free (and not acquired within its window), as `holder`, in as
    /// few statements as the database allows; the names are distinct. Returns the locks taken,
    /// by name. Reads each window when binding it, like [`acquire`](Self::acquire).
    #[doc(hidden)]
    fn acquire_batch<'a>(
        connection: &'a mut Connection<Self>,
        sql: &'a Self::Statements,
        holder: &'a str,
        configs: impl Iterator<Item = &'a LockConfiguration> + Send + 'a,
    ) -> impl Future<Output = Result<Vec<(String, Acquired)>, sqlx::Error>> + Send + 'a {
        async move {
            let mut won = Vec::new();
            for config in configs {
                let args = Acquire {
                    name: config.name(),
                    holder,
                    lock_at_most_for: config.lock_at_most_for(),
                    config,
                };
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
        sql: &'a Self::Statements,
        state: &'a Self::State,
        args: Lease<'a>,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send + 'a;

    /// Moves the lease's end to `now + duration`: the new `lock_until` if it was ours and live.
    #[doc(hidden)]
    fn extend<'a>(
        connection: &'a mut Connection<Self>,
        sql: &'a Self::Statements,
        args: Lease<'a>,
    ) -> impl Future<Output = Result<Option<NaiveDateTime>, sqlx::Error>> + Send + 'a;

    /// Inside the caller's transaction: whether `(name, holder, token)` is the live lease,
    /// locking its row against takeover until the transaction ends.
    #[doc(hidden)]
    fn verify<'a>(
        connection: &'a mut Connection<Self>,
        sql: &'a Self::Statements,
        name: &'a str,
        holder: &'a str,
        token: i64,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send + 'a;

    /// Rows of the lock table: one lock's, or all by name.
    #[doc(hidden)]
    fn read_rows<'a>(
        pool: &'a Pool<Self::Database>,
        sql: &'a Self::Statements,
        name: Option<&'a str>,
    ) -> impl Future<Output = Result<Vec<RowParts>, sqlx::Error>> + Send + 'a;

    /// Creates the table if missing and adds the fencing token column if missing; idempotent
    /// and safe to run concurrently.
    #[doc(hidden)]
    fn create_schema<'a>(
        pool: &'a Pool<Self::Database>,
        sql: &'a Self::Statements,
        table: &'a Table,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a;

    /// The database clock now, in UTC, as the lock statements read it.
    #[doc(hidden)]
    fn database_time(
        pool: &Pool<Self::Database>,
    ) -> impl Future<Output = Result<NaiveDateTime, sqlx::Error>> + Send + '_;

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
    pub(crate) name: &'a str,
    pub(crate) holder: &'a str,
    pub(crate) lock_at_most_for: Duration,
    /// The configuration, for its acquisition window.
    pub(crate) config: &'a LockConfiguration,
}

impl Acquire<'_> {
    /// Refuse when the last acquisition is more recent than this (zero: no condition). Read it
    /// when binding, after any wait for a connection: a tick's window grows while it waits.
    pub(crate) fn window(&self) -> Duration {
        self.config.acquired_within_window()
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

/// A dialect's column types for the lock table.
#[doc(hidden)]
#[derive(Debug)]
pub struct ColumnTypes {
    pub(crate) name: &'static str,
    pub(crate) time: &'static str,
    pub(crate) token: &'static str,
}

/// The run records of a dialect: a second table beside the lock table, one write to start a
/// run and one to end it. Implemented once per dialect, in its `runs` module; not public API.
#[doc(hidden)]
pub trait RunDialect: Send + Sync + 'static {
    /// The driver's database.
    type Database: Database;

    /// The run statements, built once from the run table.
    type Statements: Debug + Send + Sync;

    /// Builds the statements.
    fn statements(table: &RunTable) -> Self::Statements;

    /// `CREATE TABLE IF NOT EXISTS` (and its index) for the run table.
    fn create_sql(table: &RunTable) -> String;

    /// Creates the run table (and its index) if missing.
    fn create<'a>(
        pool: &'a Pool<Self::Database>,
        table: &'a RunTable,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a;

    /// Records a run's start (nothing when it exists) and returns its row.
    fn started<'a>(
        connection: &'a mut <Self::Database as Database>::Connection,
        sql: &'a Self::Statements,
        args: RunArgs<'a>,
    ) -> impl Future<Output = Result<RunRow, sqlx::Error>> + Send + 'a;

    /// Records a run's end on its row if still running, or the whole run when it has none.
    fn finished<'a>(
        connection: &'a mut <Self::Database as Database>::Connection,
        sql: &'a Self::Statements,
        args: RunArgs<'a>,
        outcome: &'a str,
        error: Option<&'a str>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a;

    /// The run rows of a query, newest first.
    fn list<'a>(
        pool: &'a Pool<Self::Database>,
        sql: &'a Self::Statements,
        lock: Option<&'a str>,
        since: Option<NaiveDateTime>,
        limit: i64,
    ) -> impl Future<Output = Result<Vec<RunRow>, sqlx::Error>> + Send + 'a;

    /// Deletes the run rows of `lock` past its newest `per_lock`, and every row older than the
    /// retention.
    fn trim<'a>(
        pool: &'a Pool<Self::Database>,
        sql: &'a Self::Statements,
        table: &'a RunTable,
        lock: &'a str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a;
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
    /// The fencing token: a 64-bit integer.
    Token,
}

pub(crate) mod sealed {
    /// Only this crate's dialects implement [`Dialect`](super::Dialect).
    pub trait Sealed {}
}
