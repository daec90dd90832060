//! Lock providers for [shedlock](https://docs.rs/shedlock) on [sqlx](https://docs.rs/sqlx):
//! cluster locks for scheduled jobs in a table of the database the service already has, on
//! the **database's clock**, with **fencing tokens**.
//!
//! | feature | provider | times | acquire |
//! |---|---|---|---|
//! | `postgres` | `PgLockProvider` | `TIMESTAMP`, UTC, `clock_timestamp()` | 1 statement: upsert `RETURNING` |
//! | `mysql` | `MySqlLockProvider` (MySQL, MariaDB; tested on MariaDB 10.11) | `DATETIME(3)`, UTC, `UTC_TIMESTAMP(3)` | 1 statement if held, 2 if free or a tick is refused, 3 on first use |
//! | `sqlite` | `SqliteLockProvider` | TEXT `YYYY-MM-DD HH:MM:SS.SSS`, UTC, `'now'` | 1 statement: upsert `RETURNING` |
//!
//! Release and extend are one `UPDATE` each (MySQL: extend reads the new `lock_until` back with
//! a second statement). All statements run in autocommit; none waits for a lock to become free.
//! The statement counts are pinned by the tests (`statements_per_operation`).
//!
//! # One provider, one seam per database
//!
//! The three providers are one type, [`SqlLockProvider<D>`](SqlLockProvider), over a
//! [`Dialect`]: the builder, connection handling, retries, error mapping,
//! inspection (the [`LockInspector`](shedlock_core::LockInspector) every store implements:
//! records, listing, the database clock, an operator's release), the fencing guard
//! ([`verify_lease`](SqlLockProvider::verify_lease)), operators' tools
//! ([`check_schema`](SqlLockProvider::check_schema),
//! [`check_access`](SqlLockProvider::check_access)) and
//! [`create_schema`](SqlLockProvider::create_schema) are written once; a dialect supplies its
//! SQL text, column types and how parameters are bound and results read. The `shedlock`
//! command (crate `shedlock-cli`) is built on these.
//! [`PgLockProvider`], [`MySqlLockProvider`] and [`SqliteLockProvider`] name the three.
//!
//! # The fast path
//!
//! sqlx's pool pings a connection whenever it takes one back, and (unless built with
//! `test_before_acquire(false)`) whenever it hands one out: on a lock statement of one round
//! trip, that is two or three. So every provider runs its lock statements on connections of
//! its own, up to 32 by default (4 on an SQLite file), opened as concurrent statements need
//! them ([`dedicated_connections`](SqlLockProviderBuilder::dedicated_connections)), and
//! `connect(url)` opens a pool that skips the checkout ping. Given a pool of yours, the
//! provider opens its connections through it (its options and `after_connect` apply), in
//! addition to its `max_connections`.
//!
//! ```
//! # #[cfg(feature = "sqlite")]
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use shedlock_core::{LockConfiguration, LockInspector, LockQuery};
//! use shedlock_runtime::LockingTaskExecutor;
//! use shedlock_sqlx::SqliteLockProvider;
//!
//! let provider = SqliteLockProvider::connect("sqlite::memory:").await?;
//! provider.create_schema().await?;
//! let executor = LockingTaskExecutor::new(provider.clone());
//! let config = LockConfiguration::new("send_newsletter", Duration::from_secs(300), Duration::ZERO)?;
//! let outcome = executor.execute(&config, async { /* the job */ }).await?;
//! assert!(outcome.was_executed());
//! for record in provider.list_locks(&LockQuery::all()).await? {
//!     println!("{record}"); // send_newsletter: last held by host:4121:a83e until … (token …)
//! }
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "sqlite"))]
//! # fn main() {}
//! ```
//!
//! # The lock table
//!
//! ShedLock's table plus two columns, `fencing_token` and `last_tick` (below): a table ShedLock
//! (Java) or an earlier version created keeps working, and Java and Rust instances can share
//! it, once the columns exist; Java's statements never name them. `create_schema()` creates the
//! table if needed and adds the columns that are missing; it is idempotent and safe to run
//! from every instance at start-up. The table and column names are
//! configurable ([`SqlLockProviderBuilder`], [`ColumnNames`]); only plain identifiers are
//! accepted. The same DDL is in `sql/` beside this crate, for migration tools.
//!
//! PostgreSQL (`sql/postgres.sql`):
//! ```sql
#![doc = include_str!("../sql/postgres.sql")]
//! ```
//! MySQL and MariaDB (`sql/mysql.sql`):
//! ```sql
#![doc = include_str!("../sql/mysql.sql")]
//! ```
//! SQLite (`sql/sqlite.sql`):
//! ```sql
#![doc = include_str!("../sql/sqlite.sql")]
//! ```
//!
//! # Run records
//!
//! [`RunLog`](shedlock_core::RunLog) keeps one row per attempt of a run in a second table
//! beside the lock table (`<table>_runs`, [`runs_table`](SqlLockProviderBuilder::runs_table)),
//! created by `create_schema` with the lock table (the DDL above).
//!
//! - **Bounded by construction.** Every run's start deletes its lock's rows past the newest
//!   [`runs_per_lock`](SqlLockProviderBuilder::runs_per_lock) and every row older than
//!   [`run_retention`](SqlLockProviderBuilder::run_retention): PostgreSQL in the start's own
//!   statement; MySQL and SQLite in a `DELETE` after the start, run when the start's read finds
//!   the lock 8 rows over or a row past the retention (a `DELETE` takes SQLite's write lock and
//!   locks the rows InnoDB scans, so it does not run when there is nothing to delete). A lock
//!   thus holds at most `runs_per_lock` + 8 rows whichever instances run it, in whatever order
//!   locks run, and whether or not its runs ever end (an instance killed mid-run). A run whose
//!   heartbeat is live is never deleted. Rows past the retention go at most 1000 per start,
//!   oldest first, so a start never turns into a long delete (a retention lowered on a large
//!   table); the next starts take the rest.
//! - **Reads push down.** [`runs`](shedlock_core::RunLog::runs) sends the lock, `since`,
//!   `before` (a row comparison on start, token and attempt) and the limit to the database,
//!   newest first, read through two indexes: `(lock_name, started_at, fencing_token, attempt)`
//!   for one lock's pages, recovery's look-back and the trim, and
//!   `(started_at, fencing_token, attempt)` for pages across locks and the retention. A page
//!   costs the same after a month of history as after a minute.
//! - **Run heartbeats without a new column.** While a row's `outcome` is `running`, its
//!   `finished_at` holds the run's heartbeat deadline (database clock):
//!   [`RunRecord::alive_until`](shedlock_core::RunRecord::alive_until), `finished_at` none.
//!   `run_started` with a lease writes it (one statement with the start), `run_alive` moves it
//!   on with one `UPDATE` only while the row runs and the deadline has not passed, and the end
//!   overwrites it with the end time. No column was added, so a run table made by an earlier
//!   version (or from `sql/` by a migration tool) keeps working as it is, heartbeats included.
//! - **Tables made before the indexes** work without them (reads and trims scan more);
//!   `create_schema` adds them (`CREATE INDEX IF NOT EXISTS`; on MySQL and MariaDB after
//!   checking `information_schema`) and drops the index on `started_at` alone they replace.
//!   The `sql/` files show the statements for migration tools.
//! - **Statements per run** (pinned by the tests, `run_statements_per_run`): PostgreSQL 1 to
//!   start, 1 per heartbeat, 1 to end; SQLite 2 to start (the upsert and the read of whether
//!   a trim is due, both in the process) plus a `DELETE` about every 9 runs of a lock at its
//!   bound, 1 per heartbeat, 1 to end; MySQL and MariaDB 2 to start (`INSERT IGNORE` and the
//!   read of the row and of whether a trim is due) plus the same `DELETE`s, 1 per heartbeat,
//!   1 to end.
//! - **A tick's runs share their statements** (`runs_made_together_share_statements`): a
//!   record start, a record end or a release made while an earlier one of its kind is in
//!   flight waits for it and goes out with every other that came meanwhile (group commit, no
//!   timer; the first goes alone at once). When a thousand jobs of one tick start and end
//!   together, their starts cost one statement on PostgreSQL (an `unnest` upsert that also
//!   trims each lock), two on MySQL/MariaDB and SQLite (a multi-row upsert and one read of the
//!   rows or of the trims due), their ends one (a multi-row upsert), and their releases one on
//!   PostgreSQL and SQLite (an `UPDATE` joined to the leases, `RETURNING` the names released)
//!   and a `READ COMMITTED` transaction of two on MySQL/MariaDB (the live rows locked and read
//!   in name order, then one `UPDATE`), instead of one statement each. Each call still gets
//!   its own answer; when a batch's statement fails, each call goes alone, for its own error.
//!
//! # Fleet board
//!
//! [`Board`](shedlock_core::Board), what a [`Fleet`](shedlock_core::Fleet) publishes of its
//! instances' jobs and what operators switch, lives in a third table beside the lock table
//! (`<table>_board`, [`board_table`](SqlLockProviderBuilder::board_table)), created by
//! `create_schema` (the DDL above); the lock table is untouched. One row per key: the key
//! (`board_key`, up to 1024 bytes, compared in byte order: PostgreSQL `COLLATE "C"`, MySQL
//! `VARBINARY`, SQLite `BINARY`), the value, a version, and `written_at` and `expires_at`
//! (NULL: kept) on the database's clock.
//!
//! - **Versions never come back.** Every write takes a version larger than any the table
//!   handed out before, also after the key was removed and written again: from a sequence
//!   (PostgreSQL, `<board table>_version`), the table's `AUTO_INCREMENT` (MySQL, MariaDB) or
//!   SQLite's `AUTOINCREMENT` row id.
//! - **Conditions are the database's.** A write or removal under `Absent` or `Version(v)` is
//!   decided in the statement that makes it, against the live row (an expired row counts as
//!   absent, is never read, and is replaced or deleted by the next write or removal of its
//!   key): PostgreSQL one statement each (`INSERT … ON CONFLICT DO UPDATE … WHERE`, `UPDATE`,
//!   `DELETE … RETURNING`); SQLite one (`INSERT OR REPLACE … SELECT … WHERE`,
//!   `DELETE … RETURNING`); MySQL and MariaDB, which return nothing from a write, a `REPLACE`
//!   (`Always`), an `INSERT` (`Absent`; after a duplicate key, a `DELETE` of the row if it
//!   expired and the `INSERT` again), a transaction of a `DELETE` of the live row of that
//!   version and an `INSERT` (`Version`), the version read from `LAST_INSERT_ID`. A
//!   serialization failure or deadlock is retried as for the lock statements.
//! - **A prefix is one statement**, a range of the key index (`key >= prefix AND key <` the
//!   prefix's successor, never `LIKE`), in key order.
//!
//! # Database time
//!
//! `locked_at` and `lock_until` are computed and compared inside the statements with the
//! database's clock, read once per statement, in UTC. The providers never read the instance's
//! clock, so instances with skewed clocks or different time zones agree; the leases they return
//! carry the database's times. Durations are rounded up to whole milliseconds and capped at
//! about 1000 years.
//!
//! # Fencing tokens
//!
//! Every acquisition sets `fencing_token = max(previous + 1, database clock in µs since 1970)`
//! in the same statement, so a lease's token is strictly greater than every earlier one of its
//! lock name, also after the row was deleted (an operator's reset), the table truncated or a
//! backup restored, as long as the database clock has not stepped back by more than the time
//! since the earlier token was issued. Release, extend and the fencing guard match holder
//! **and** token, so a holder whose lease was taken over cannot touch the new one. Pass the token to the resource you write. When that resource is the same database,
//! `verify_lease` (on each provider) is a ready guard: called inside your transaction, it
//! checks the lease on database time and locks its row until you commit, so a paused former
//! holder's write is rejected with [`Error::LockLost`](shedlock_core::Error::LockLost).
//!
//! Rows edited by hand: a token of 0, none or a negative one (ShedLock's rows) continues from
//! the clock; a token at `i64::MAX` makes acquisition fail with
//! [`Error::Store`](shedlock_core::Error::Store) rather than wrap. Deleting a row frees the lock
//! (ShedLock's usual reset); the next token is still above every earlier one.
//!
//! Every lock statement is read to its end, so a commit that fails after the statement's
//! rows (SQLite in rollback-journal mode beside a reader, a deferred constraint) is reported
//! as the failure it is, never as a grant, an extension or a release.
//!
//! # Tick claims
//!
//! An acquisition for a tick
//! ([`LockConfiguration::for_tick`](shedlock_core::LockConfiguration::for_tick)) is granted
//! only if, besides the lock being free, the row's `last_tick` is NULL or at least the tick's
//! spacing before the tick, and the tick lies at most its `ahead` bound after the database
//! clock (in milliseconds since 1970, from the clock the statement reads for `lock_until`);
//! the grant writes the tick to `last_tick` in the same statement, and every dialect's batch
//! applies the same per lock. Without a tick, `last_tick` is neither checked nor changed;
//! release and extend never touch it. Rows without one (written before the column existed, or
//! by Java ShedLock) take any tick. MySQL and MariaDB refuse a tick in the `UPDATE`'s
//! `WHERE`, so a refused tick costs the `INSERT IGNORE` of a first use too (2 statements).
//!
//! # Errors
//!
//! Database failures are [`Error::Store`](shedlock_core::Error::Store) naming the operation
//! and lock; a missing table or column says so and how to fix it (a missing `fencing_token` or
//! `last_tick`: its name and the `ALTER TABLE` adding it). Invalid table, column or holder
//! names are [`Error::InvalidConfig`](shedlock_core::Error::InvalidConfig) naming the field.
//! Nothing here panics on what the database returns.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// Applies `#[cfg]` "any SQL database feature" to each item.
macro_rules! any_database {
    ($($item:item)*) => {
        $(#[cfg(any(feature = "postgres", feature = "mysql", feature = "sqlite"))] $item)*
    };
}

any_database! {
    mod board;
    mod builder;
    mod connect;
    pub mod dialect;
    mod error;
    mod inspect;
    pub(crate) mod names;
    #[cfg(feature = "postgres")]
    mod primary;
    mod provider;
    mod row;
    mod runs;
    mod schema_check;
    mod values;

    #[doc(hidden)]
    pub use board::BoardDriver;
    pub use builder::{ColumnNames, SqlLockProviderBuilder};
    pub use provider::SqlLockProvider;
    pub use schema_check::SchemaIssue;
}
#[cfg(feature = "mysql")]
pub use dialect::mysql::MySqlLockProvider;
#[cfg(feature = "postgres")]
pub use dialect::postgres::PgLockProvider;
#[cfg(feature = "sqlite")]
pub use dialect::sqlite::SqliteLockProvider;

// What the crate's modules share.
any_database! {
    use builder::{Table, validate_holder};
    use dialect::{Acquire, Acquired, CatalogColumn, ColumnKind, ColumnTypes, Dialect, Lease};
    use error::store_error;
    use row::{RowParts, record};
    use values::*;
}
#[cfg(feature = "postgres")]
use names::MAX_IDENTIFIER_LEN;
