//! The builder of every SQL provider, and the validated table description it produces.

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::{
    DEFAULT_RUN_RETENTION, DEFAULT_RUNS_PER_LOCK, Error, default_holder, validate_run_retention,
};
use sqlx::Pool;

use crate::names::{validate_column, validate_table};
use crate::runs::{RunTable, default_runs_table};
use crate::{ColumnTypes, Dialect, SqlLockProvider};

/// The column names of the lock table; [`Default`] is ShedLock's layout plus `fencing_token`
/// and `last_tick`.
///
/// ```
/// use shedlock_sqlx::ColumnNames;
///
/// let columns = ColumnNames::default().name("lock_name").locked_by("owner");
/// # let _ = columns;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ColumnNames {
    pub(crate) name: String,
    pub(crate) lock_until: String,
    pub(crate) locked_at: String,
    pub(crate) locked_by: String,
    pub(crate) fencing_token: String,
    pub(crate) last_tick: String,
}

impl Default for ColumnNames {
    fn default() -> Self {
        ColumnNames {
            name: "name".into(),
            lock_until: "lock_until".into(),
            locked_at: "locked_at".into(),
            locked_by: "locked_by".into(),
            fencing_token: "fencing_token".into(),
            last_tick: "last_tick".into(),
        }
    }
}

/// One setter per column, named after its field.
macro_rules! column_setters {
    ($($(#[$doc:meta])* $column:ident;)*) => {$(
        $(#[$doc])*
        pub fn $column(mut self, column: impl Into<String>) -> Self {
            self.$column = column.into();
            self
        }
    )*};
}

impl ColumnNames {
    column_setters! {
        /// The lock name column (primary key), default `name`.
        name;
        /// The lease end column, default `lock_until`.
        lock_until;
        /// The acquisition time column, default `locked_at`.
        locked_at;
        /// The holder column, default `locked_by`.
        locked_by;
        /// The fencing token column, default `fencing_token`.
        fencing_token;
        /// The column of the last tick granted
        /// ([`LockConfiguration::for_tick`](shedlock_core::LockConfiguration::for_tick)), in
        /// milliseconds since 1970, default `last_tick`.
        last_tick;
    }

    fn validate(&self) -> Result<(), Error> {
        validate_column("columns.name", &self.name)?;
        validate_column("columns.lock_until", &self.lock_until)?;
        validate_column("columns.locked_at", &self.locked_at)?;
        validate_column("columns.locked_by", &self.locked_by)?;
        validate_column("columns.fencing_token", &self.fencing_token)?;
        validate_column("columns.last_tick", &self.last_tick)
    }
}

/// Configures a SQL lock provider: table, columns, holder identity and connections.
///
/// Get one from `PgLockProvider::builder`, `MySqlLockProvider::builder` or
/// `SqliteLockProvider::builder`; `build()` validates every identifier and returns
/// [`Error::InvalidConfig`] naming the offending field (`table`, `columns.name`, `holder`, …).
/// Only plain identifiers (`[A-Za-z_][A-Za-z0-9_]*`, at most 63 characters each) are accepted,
/// the table optionally as `schema.table`: they are written into the SQL unquoted.
#[derive(Debug)]
pub struct SqlLockProviderBuilder<D: Dialect> {
    pool: Pool<D::Database>,
    table: String,
    columns: ColumnNames,
    holder: Option<String>,
    dedicated_connections: Option<usize>,
    runs_table: Option<String>,
    board_table: Option<String>,
    run_retention: Duration,
    runs_per_lock: u32,
    /// The dialect's own settings (PostgreSQL: release notifications).
    pub(crate) options: D::Options,
}

impl<D: Dialect> SqlLockProviderBuilder<D> {
    pub(crate) fn new(pool: Pool<D::Database>) -> Self {
        SqlLockProviderBuilder {
            pool,
            table: "shedlock".into(),
            columns: ColumnNames::default(),
            holder: None,
            dedicated_connections: None,
            runs_table: None,
            board_table: None,
            run_retention: DEFAULT_RUN_RETENTION,
            runs_per_lock: DEFAULT_RUNS_PER_LOCK,
            options: D::Options::default(),
        }
    }

    /// The lock table, `table` or `schema.table`; default `shedlock`.
    pub fn table(mut self, table: impl Into<String>) -> Self {
        self.table = table.into();
        self
    }

    /// The column names; default [`ColumnNames::default`].
    pub fn columns(mut self, columns: ColumnNames) -> Self {
        self.columns = columns;
        self
    }

    /// The identity this provider acquires locks as; default
    /// [`default_holder()`](shedlock_core::default_holder) (`host:pid:random`).
    /// Must be unique per running instance.
    pub fn holder(mut self, holder: impl Into<String>) -> Self {
        self.holder = Some(holder.into());
        self
    }

    /// How many connections of its own the provider (and its clones) may open for the lock
    /// statements (acquire, release, extend); default 32 on PostgreSQL and MySQL, 4 on an
    /// SQLite file, 0 on an in-memory SQLite database. 0 runs every statement on a connection
    /// checked out of the pool.
    ///
    /// sqlx's pool pings a connection on every return (and, unless built with
    /// `test_before_acquire(false)`, on every checkout), so on the pool a lock statement costs
    /// two or three round trips instead of one: about 0.7 of the throughput the database
    /// allows, against 0.9 and more on connections of the provider's own (`BENCHMARKS.md`).
    ///
    /// - They are opened when concurrent statements need them, with the pool's connect options
    ///   and `after_connect` but outside its places: they count in addition to its
    ///   `max_connections`, and a lock statement never waits for a place in the pool. Up to
    ///   `connections` are open at a time; a statement finding all busy waits for one, as it
    ///   would for a pool's. One idle for a minute is closed, so a burst of jobs on one tick
    ///   does not hold its connections for good.
    /// - Opening one never waits in sqlx's connect backoff (which retries a refused
    ///   connection silently, with pauses of up to a fifth of `acquire_timeout`, until
    ///   `acquire_timeout`): a connection not open within 150 ms is checked by one direct
    ///   attempt, and when the server refuses, the operation fails at once with the server's
    ///   answer (`Connection refused`, PostgreSQL's "starting up"); when it accepts, a new
    ///   attempt connects at once. So a tick asked while the database is down is lost within a
    ///   fraction of a second (logged), and the first tick after the database is back connects
    ///   on its first attempt (`docs/RELIABILITY.md`, "Back after an outage").
    /// - When the server refuses another connection for lack of room (PostgreSQL `53300`,
    ///   MySQL 1040) while the provider has others, the statement waits for those instead of
    ///   failing, and the provider opens one fewer from then on. Size it to what the server
    ///   can give every instance of the fleet (PostgreSQL's `max_connections` is 100 by
    ///   default).
    /// - One idle for 30 s is pinged before use. One whose statement failed on the connection
    ///   (not in the database, or with an error that ends the session) or was cancelled
    ///   mid-way is closed, together with the idle ones (a restarted server or a cut network
    ///   took them too). An operation that failed so on a connection that had been idle runs
    ///   once more on a new one (its statements are conditional on the table, so this never
    ///   grants a lease twice); the caller sees the error only if that fails too.
    /// - They are closed at the next operation after the pool was closed, and when the
    ///   provider and all its clones are dropped.
    pub fn dedicated_connections(mut self, connections: usize) -> Self {
        self.dedicated_connections = Some(connections);
        self
    }

    /// The run-record table (`RunLog`), `table` or `schema.table`; default the lock table's name
    /// with `_runs` appended (`shedlock_runs`; a name that would be longer than 63 characters is
    /// cut and given a hash).
    pub fn runs_table(mut self, table: impl Into<String>) -> Self {
        self.runs_table = Some(table.into());
        self
    }

    /// The fleet's board table ([`Board`](shedlock_core::Board)), `table` or `schema.table`;
    /// default the lock table's name with `_board` appended (`shedlock_board`; a name that
    /// would be longer than 63 characters is cut and given a hash). PostgreSQL's versions come
    /// from a sequence beside it, `<board table>_version`.
    pub fn board_table(mut self, table: impl Into<String>) -> Self {
        self.board_table = Some(table.into());
        self
    }

    shedlock_core::run_retention_setters! {
        /// Every run's start deletes the rows past it (any lock's; the oldest 1000 at most), in
        /// the start's own statement (PostgreSQL) or, when a read after the start finds one,
        /// in a `DELETE` after it (MySQL, SQLite). A run whose heartbeat is live is kept.
        run_retention;
        /// Every run's start deletes its lock's rows past them (PostgreSQL: at every start, in
        /// its own statement; MySQL, SQLite: once the lock is 8 over, in a `DELETE` after the
        /// start), so a lock holds at most `runs_per_lock` + 8 rows, whichever instances run it
        /// and whether or not its runs end. A run whose heartbeat is live is kept.
        runs_per_lock;
    }

    /// Validates the configuration and builds the provider.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field: `table`, `runs_table`, `board_table`,
    /// `columns.*`, `holder`, or a dialect's own setting (PostgreSQL: `release_channel`).
    pub fn build(self) -> Result<SqlLockProvider<D>, Error> {
        validate_table("table", &self.table)?;
        self.columns.validate()?;
        let holder = match self.holder {
            Some(holder) => validate_holder(holder)?,
            None => default_holder().into(),
        };
        let runs_name = self
            .runs_table
            .unwrap_or_else(|| default_runs_table(&self.table));
        validate_table("runs_table", &runs_name)?;
        let board_name = self
            .board_table
            .unwrap_or_else(|| crate::board::default_board_table(&self.table));
        validate_table("board_table", &board_name)?;
        validate_run_retention(self.run_retention, self.runs_per_lock)?;
        let run_table = RunTable {
            name: runs_name,
            retention: self.run_retention,
            per_lock: self.runs_per_lock,
        };
        let table = Table {
            name: self.table,
            columns: self.columns,
        };
        let dedicated = self
            .dedicated_connections
            .unwrap_or_else(|| D::default_dedicated_connections(&self.pool));
        let state = D::state(self.options, &table)?;
        Ok(SqlLockProvider::from_parts(
            self.pool, table, run_table, board_name, holder, dedicated, state,
        ))
    }
}

/// Checks a holder identity ([`shedlock_core::validate_holder`]) and keeps it shared.
pub(crate) fn validate_holder(holder: String) -> Result<Arc<str>, Error> {
    shedlock_core::validate_holder(&holder)?;
    Ok(holder.into())
}

/// A validated lock table: every name in it is safe to splice into SQL.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct Table {
    pub(crate) name: String,
    pub(crate) columns: ColumnNames,
}

impl Table {
    /// `CREATE TABLE IF NOT EXISTS` in the layout of the `sql/` files: ShedLock's columns plus
    /// [`added_columns`](Self::added_columns).
    pub(crate) fn create_table_sql(&self, types: &ColumnTypes) -> String {
        let c = &self.columns;
        let [(token, token_type), (last_tick, tick_type)] = self.added_columns(types.token);
        format!(
            "CREATE TABLE IF NOT EXISTS {t} (\n    \
             {name} {name_type} NOT NULL,\n    \
             {until} {time} NOT NULL,\n    \
             {at} {time} NOT NULL,\n    \
             {by} VARCHAR(255) NOT NULL,\n    \
             {token} {token_type},\n    \
             {last_tick} {tick_type},\n    \
             PRIMARY KEY ({name})\n);",
            t = self.name,
            name = c.name,
            until = c.lock_until,
            at = c.locked_at,
            by = c.locked_by,
            name_type = types.name,
            time = types.time,
        )
    }

    /// The columns beyond ShedLock's layout, with their definitions for a dialect's `integer`
    /// type: what `create_schema` adds to a table made by ShedLock (Java) or by an earlier
    /// version. The fencing token, and the last tick granted (milliseconds since 1970; NULL, as
    /// in the rows Java ShedLock inserts, for none). ShedLock's statements never name them.
    pub(crate) fn added_columns(&self, integer: &str) -> [(&str, String); 2] {
        [
            (
                &self.columns.fencing_token,
                format!("{integer} NOT NULL DEFAULT 0"),
            ),
            (&self.columns.last_tick, integer.to_owned()),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(table: &str, columns: ColumnNames) -> &'static str {
        let checked = validate_table("table", table).and_then(|()| columns.validate());
        match checked {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    fn holder_field(holder: String) -> &'static str {
        match validate_holder(holder) {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    /// The run-record settings follow the rules every store shares (`validate_run_retention`).
    #[cfg(feature = "sqlite")]
    #[tokio::test]
    async fn run_settings_follow_the_shared_rules() {
        use crate::SqliteLockProvider;
        let pool = sqlx::SqlitePool::connect_lazy("sqlite::memory:").unwrap();
        let field = |builder: SqlLockProviderBuilder<_>| match builder.build() {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        };
        let builder = || SqliteLockProvider::builder(pool.clone());
        assert_eq!(field(builder().runs_per_lock(0)), "runs_per_lock");
        assert_eq!(
            field(builder().run_retention(Duration::ZERO)),
            "run_retention"
        );
        assert!(builder().build().is_ok());
    }

    #[test]
    fn names_the_offending_field() {
        let default = ColumnNames::default;
        assert_eq!(field("x; DROP TABLE y", default()), "table");
        assert_eq!(
            field("shedlock", default().lock_until("a b")),
            "columns.lock_until"
        );
        assert_eq!(
            field("shedlock", default().fencing_token("t\"--")),
            "columns.fencing_token"
        );
        assert_eq!(holder_field(String::new()), "holder");
        assert_eq!(holder_field("h".repeat(256)), "holder");
        assert_eq!(holder_field("a\nb".into()), "holder");
    }

    #[test]
    fn defaults_are_valid() {
        assert!(validate_table("table", "shedlock").is_ok());
        assert!(ColumnNames::default().validate().is_ok());
        assert!(validate_holder(default_holder().into()).is_ok());
        assert!(validate_holder("ü".repeat(255)).is_ok());
    }
}
