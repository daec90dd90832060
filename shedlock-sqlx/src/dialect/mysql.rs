//! MySQL and MariaDB.
//!
//! Times are `DATETIME(3)` in UTC from `UTC_TIMESTAMP(3)`, which MySQL evaluates once per
//! statement; the session time zone never enters. Durations are bound as microseconds.

mod batch;
mod runs;

use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use chrono::NaiveDateTime;
use shedlock_core::{Error, LockConfiguration};
use sqlx::mysql::{MySqlDatabaseError, MySqlPoolOptions};
use sqlx::{Connection, Executor as _, MySql as MySqlDb, MySqlConnection, MySqlPool, SqlStr};

use crate::dialect::{Statements, add_column, identifiers, sealed::Sealed};
use crate::{
    Acquire, Acquired, CatalogColumn, ColumnKind, ColumnTypes, Dialect, Lease, SqlLockProvider,
    Table, lease_millis, trusted_sql,
};

/// MySQL's error number for "Duplicate column name".
const ER_DUP_FIELDNAME: u16 = 1060;

/// Locks in a MySQL or MariaDB table, on the database's clock, with fencing tokens.
///
/// Times are `DATETIME(3)` in UTC from `UTC_TIMESTAMP(3)`. sqlx connects with
/// `CLIENT_FOUND_ROWS` and neither MySQL nor MariaDB can return values from an `UPDATE`, so the
/// statements differ from PostgreSQL's (round trips, all autocommit, all on one connection):
///
/// | operation | lock free | lock held | first use of the name |
/// |---|---|---|---|
/// | acquire | 2: conditional `UPDATE` (token via `LAST_INSERT_ID`) + `SELECT` of the times | 1 | 3: `UPDATE`, `INSERT IGNORE`, `SELECT` |
///
/// A tick claim the lock's last tick or the tick's `ahead` bound refuses costs 2: the `UPDATE`
/// matches no row, and the `INSERT IGNORE` finds the row (or, ahead, inserts none). Release is
/// one `UPDATE`; extend is an `UPDATE` and a `SELECT` of the new `lock_until`.
/// Every attempt starts from the table, so a row deleted by hand is recreated by the next one.
///
/// On MariaDB 10.5 and later, with sessions in `READ COMMITTED` (as
/// [`connect`](SqlLockProvider::connect) sets them up there; in a pool of your own, set
/// `SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED` in its `after_connect`), a batch
/// (`acquire_many`, or acquires that queued while every connection was busy) of up to 1,000
/// locks is one statement in autocommit, whatever state its locks are in: an
/// `INSERT … SELECT` of the batch joined to its rows, read and locked `FOR UPDATE` in name
/// order, keeping the missing and the free ones (the single acquire's conditions per row),
/// `ON DUPLICATE KEY UPDATE` taking the rows found, `RETURNING` those inserted or taken. A
/// batch of releases is one statement the same way (the live rows of the leases, locked in
/// name order, ended, `RETURNING` their names). `READ COMMITTED` takes no gap locks where a
/// name has no row, which would make two first uses of the same names deadlock.
///
/// Elsewhere (MySQL, which has no `INSERT … RETURNING`; MariaDB in another isolation level),
/// a batch costs four statements per 1,000 locks, whatever state they are in, in one
/// `READ COMMITTED` transaction (with its `START TRANSACTION` and `COMMIT`, 6 round trips): a
/// `SELECT … FOR UPDATE` of the rows in name order, an `UPDATE` of the free ones joined to the
/// batch with each lock's lease, window and tick, an `INSERT IGNORE` of the missing ones and a
/// `SELECT` of those won (the `UPDATE` or the `INSERT` is left out when no row, or every row,
/// exists). The statements' text depends on the batch's size, so each new size is prepared
/// once per connection. The rows are locked until the commit: another instance's batch (or
/// acquire) of the same locks waits for it, in the same order, never in a deadlock.
///
/// [`connect`](SqlLockProvider::connect) opens a pool of sqlx's default size (10) that does not
/// ping connections it hands out, its sessions in `READ COMMITTED` on MariaDB 10.5 and later
/// (unless the server logs statements, not rows, to its binary log, which InnoDB refuses in
/// that level); the provider opens up to 32 connections of its own for lock
/// statements as concurrent statements need them (see
/// [`dedicated_connections`](crate::SqlLockProviderBuilder::dedicated_connections)).
///
/// Lock names compare case-sensitively in a table made by
/// [`create_schema`](SqlLockProvider::create_schema) (`utf8mb4_bin`); in a ShedLock table with
/// the default collation, `Job` and `job` are one lock. ShedLock's MySQL DDL uses
/// `TIMESTAMP(3)` columns: those are only correct when the session time zone is UTC, so convert
/// them to `DATETIME(3)` (see `sql/mysql.sql`).
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_core::{LockConfiguration, LockProvider};
/// use shedlock_sqlx::MySqlLockProvider;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let provider = MySqlLockProvider::connect("mysql://root@localhost/app").await?;
/// provider.create_schema().await?;
/// let config = LockConfiguration::new("nightly_report", Duration::from_secs(600), Duration::ZERO)?;
/// if let Some(lease) = provider.acquire(&config).await? {
///     println!("running with fencing token {}", lease.fencing_token());
///     provider.release(&lease).await?;
/// }
/// # Ok(())
/// # }
/// ```
pub type MySqlLockProvider = SqlLockProvider<MySql>;

/// The MySQL and MariaDB [`Dialect`].
#[derive(Debug, Clone, Copy)]
pub struct MySql;

impl Sealed for MySql {}

const NOW: &str = "UTC_TIMESTAMP(3)";

/// The statements only MySQL has: neither MySQL nor MariaDB can return values from an
/// `UPDATE`.
#[doc(hidden)]
#[derive(Debug)]
pub struct MySqlStatements {
    /// `?` name, `?` lease µs, `?` holder, `?` tick or NULL, `?` earliest clock ms
    /// (`TickBounds`): first use of a lock name, its token through `LAST_INSERT_ID`.
    insert: SqlStr,
    /// `?` name, `?` holder, `?` token: (locked_at, lock_until) of that lease.
    lease_times: SqlStr,
    /// A batch of acquisitions (`batch.rs`).
    batch: batch::BatchStatements,
    /// Which statements this provider's batches take (`BatchPath`), found on the first batch.
    path: AtomicU8,
}

/// How a provider's batches of acquisitions and releases run, found once from its first
/// connection (`MySqlStatements::path`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum BatchPath {
    /// Not found yet.
    Unknown = 0,
    /// One statement each (`INSERT … SELECT … FOR UPDATE … ON DUPLICATE KEY UPDATE …
    /// RETURNING`): MariaDB 10.5 or later, sessions in `READ COMMITTED`.
    OneStatement = 1,
    /// A `READ COMMITTED` transaction each: MySQL (no `RETURNING`), an older MariaDB, or
    /// sessions in another isolation level (their gap locks would make two first uses of the
    /// same names deadlock).
    Transaction = 2,
}

/// Whether a server of this `VERSION()` has `INSERT … RETURNING`: MariaDB 10.5 and later.
fn has_insert_returning(version: &str) -> bool {
    if !version.contains("MariaDB") {
        return false;
    }
    // Before 11.0, MariaDB's handshake says `5.5.5-` first (for old replicas); `VERSION()`
    // does not, but either may be given.
    let version = version.strip_prefix("5.5.5-").unwrap_or(version);
    let mut numbers = version.split(['.', '-']).map(|n| n.parse::<u32>().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= (10, 5),
        _ => false,
    }
}

/// The provider's `BatchPath`, found on `connection` the first time.
async fn one_statement(
    connection: &mut MySqlConnection,
    own: &MySqlStatements,
) -> Result<bool, sqlx::Error> {
    match own.path.load(Ordering::Relaxed) {
        1 => return Ok(true),
        2 => return Ok(false),
        _ => {}
    }
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&mut *connection)
        .await?;
    let path = if has_insert_returning(&version) {
        let isolation: String = sqlx::query_scalar("SELECT @@tx_isolation")
            .fetch_one(&mut *connection)
            .await?;
        if isolation.eq_ignore_ascii_case("READ-COMMITTED") {
            BatchPath::OneStatement
        } else {
            BatchPath::Transaction
        }
    } else {
        BatchPath::Transaction
    };
    own.path.store(path as u8, Ordering::Relaxed);
    Ok(path == BatchPath::OneStatement)
}

/// Sets a new connection of [`connect`](SqlLockProvider::connect)'s pool in `READ COMMITTED`
/// on MariaDB (unless it logs statements to its binary log, which InnoDB refuses in
/// `READ COMMITTED`), where batches then cost one statement each.
async fn set_up_connection(connection: &mut MySqlConnection) -> Result<(), sqlx::Error> {
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&mut *connection)
        .await?;
    if !has_insert_returning(&version) {
        return Ok(());
    }
    let statement_log: i64 =
        sqlx::query_scalar("SELECT @@log_bin <> 0 AND @@binlog_format = 'STATEMENT'")
            .fetch_one(&mut *connection)
            .await?;
    if statement_log == 0 {
        connection
            .execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
            .await?;
    }
    Ok(())
}

/// `?` schema or NULL, `?` table, `?` column: whether the column exists.
const HAS_COLUMN: &str = "SELECT COUNT(*) FROM information_schema.columns \
     WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? AND column_name = ?";

impl Dialect for MySql {
    type Database = MySqlDb;
    type OwnStatements = MySqlStatements;
    type Options = ();
    type State = ();
    type Runs = runs::MySqlRuns;

    /// Times in `DATETIME(3)` (UTC, independent of the session time zone) and a case-sensitive
    /// name.
    const COLUMN_TYPES: ColumnTypes = ColumnTypes {
        name: "VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        time: "DATETIME(3)",
        token: "BIGINT",
    };

    const NOW: &'static str = NOW;

    /// `acquire`: `?` window µs, `?` tick or NULL, `?` window µs, `?` holder, `?` window µs, `?`
    /// window µs, `?` lease µs, `?` window µs, `?` window µs, `?` lease µs, `?` name, `?` latest
    /// last tick, `?` earliest clock ms (the window: refused if acquired more recently; the
    /// tick's bounds: `TickBounds`). Takes an expired lock in place, reporting the new token
    /// through `LAST_INSERT_ID` (0: held). Matches 1 row whenever the lock's row exists and
    /// the tick may follow its last one. `release`: `?` lock_at_least_for µs, `?` name, `?`
    /// holder, `?` token: matches 1 row if released.
    /// `extend`: the same with the lease: matches 1 row if extended. `verify`: `?` name, `?`
    /// holder, `?` token: one row if that lease is live; share-locks the row. `lock_state`:
    /// `?` name.
    fn statements(table: &Table) -> Statements<MySqlStatements> {
        let [t, name, until, at, by, token, last] = identifiers(table);
        // sqlx sets CLIENT_FOUND_ROWS, so an UPDATE reports the rows its WHERE matched, changed
        // or not. Matching on the name alone and deciding per column with IF() lets one
        // statement tell "held" (1 row, no LAST_INSERT_ID) from "missing" (0 rows) and from
        // "acquired" (LAST_INSERT_ID = new token). A tick that may not follow the row's last
        // one, or lies too far ahead of the clock, is refused in the WHERE, which sees the old
        // row: no row matches, and the INSERT IGNORE then finds the row there (or, ahead,
        // inserts nothing). The IF()s can't check it: `last` must change with the grant, after
        // which they would read it.
        //
        // Every expression means the same whether assignments see the columns' old values
        // (MariaDB's SIMULTANEOUS_ASSIGNMENT) or the new values of the columns assigned before
        // them (MySQL's and MariaDB's default, left to right). `last`, `by`, `token` and
        // `until` read only columns assigned after them (or themselves), so both orders show
        // them the old row. `at` comes last and is moved to now when the lock was free in the
        // old row (SIMULTANEOUS_ASSIGNMENT: `until` is still old) or when `until` now holds
        // this statement's new end (left to right; also true when the holder renewed the same
        // lease within the same millisecond, where moving `locked_at` only holds the lock
        // longer).
        let not_recent = format!("COALESCE({at} <= {NOW} - INTERVAL ? MICROSECOND, TRUE)");
        let free = format!("({until} <= {NOW} AND {not_recent})");
        // Tokens: `max(previous + 1, clock in µs)` (see "Token floor" in `values.rs`).
        let clock_micros = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";
        let clock_millis =
            format!("(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {NOW}) DIV 1000)");
        let acquire = format!(
            "UPDATE {t} SET \
             {last} = IF({free}, COALESCE(?, {last}), {last}), \
             {by} = IF({free}, ?, {by}), \
             {token} = IF({free}, LAST_INSERT_ID(GREATEST(GREATEST(COALESCE({token}, 0), 0) + 1, \
             {clock_micros})), {token}), \
             {until} = IF({free}, {NOW} + INTERVAL ? MICROSECOND, {until}), \
             {at} = IF({free} OR ({not_recent} AND {until} = {NOW} + INTERVAL ? MICROSECOND), \
             {NOW}, {at}) \
             WHERE {name} = ? AND COALESCE({last} <= ?, TRUE) AND {clock_millis} >= ?"
        );
        // IGNORE: a concurrent first use inserts too; exactly one of them gets the row. The
        // token comes back through LAST_INSERT_ID, as from the UPDATE.
        let insert = format!(
            "INSERT IGNORE INTO {t} ({name}, {until}, {at}, {by}, {token}, {last}) \
             SELECT ?, {NOW} + INTERVAL ? MICROSECOND, {NOW}, ?, LAST_INSERT_ID({clock_micros}), ? \
             FROM DUAL WHERE {clock_millis} >= ?"
        );
        let lease_times =
            format!("SELECT {at}, {until} FROM {t} WHERE {name} = ? AND {by} = ? AND {token} = ?");
        let release = format!(
            "UPDATE {t} SET {until} = GREATEST({at} + INTERVAL ? MICROSECOND, {NOW}) \
             WHERE {name} = ? AND {by} = ? AND {token} = ? AND {until} > {NOW}"
        );
        let extend = format!(
            "UPDATE {t} SET {until} = {NOW} + INTERVAL ? MICROSECOND \
             WHERE {name} = ? AND {by} = ? AND {token} = ? AND {until} > {NOW}"
        );
        // LOCK IN SHARE MODE rather than FOR SHARE: MariaDB knows only the former.
        let verify = format!(
            "SELECT 1 FROM {t} WHERE {name} = ? AND {by} = ? AND {token} = ? \
             AND {until} > {NOW} LOCK IN SHARE MODE"
        );
        let select_rows = format!(
            "SELECT l.{name}, l.{until}, l.{at}, l.{by}, COALESCE(l.{token}, 0), db.now \
             FROM {t} AS l, (SELECT {NOW} AS now) AS db"
        );
        Statements {
            acquire: trusted_sql(acquire),
            release: trusted_sql(release),
            extend: trusted_sql(extend),
            verify: trusted_sql(verify),
            lock_state: trusted_sql(format!("{select_rows} WHERE l.{name} = ?")),
            list_locks: trusted_sql(format!("{select_rows} ORDER BY l.{name}")),
            own: MySqlStatements {
                insert: trusted_sql(insert),
                lease_times: trusted_sql(lease_times),
                batch: batch::BatchStatements::new(table),
                path: AtomicU8::new(BatchPath::Unknown as u8),
            },
        }
    }

    fn state((): (), _: &Table) -> Result<(), Error> {
        Ok(())
    }

    /// sqlx's pool without pings, whose connections run in `READ COMMITTED` on MariaDB 10.5
    /// and later (see [`MySqlLockProvider`]).
    async fn connect(url: &str) -> Result<MySqlPool, sqlx::Error> {
        MySqlPoolOptions::new()
            .test_before_acquire(false)
            .after_connect(|connection, _| Box::pin(set_up_connection(connection)))
            .connect(url)
            .await
    }

    async fn acquire(
        connection: &mut MySqlConnection,
        sql: &Statements<MySqlStatements>,
        args: Acquire<'_>,
    ) -> Result<Option<Acquired>, sqlx::Error> {
        let (name, holder) = (args.name(), args.holder);
        let lease = micros(args.lock_at_most_for());
        let window = micros(args.window());
        let tick = args.tick();
        let updated = sqlx::query(sql.acquire.clone())
            .bind(window)
            .bind(tick.tick)
            .bind(window)
            .bind(holder)
            .bind(window)
            .bind(window)
            .bind(lease)
            .bind(window)
            .bind(window)
            .bind(lease)
            .bind(name)
            .bind(tick.latest_last)
            .bind(tick.earliest_now)
            .execute(&mut *connection)
            .await?;
        let token = if updated.rows_affected() == 0 {
            // No row yet (or deleted by hand), or the tick refused: create it.
            let inserted = sqlx::query(sql.own.insert.clone())
                .bind(name)
                .bind(lease)
                .bind(holder)
                .bind(tick.tick)
                .bind(tick.earliest_now)
                .execute(&mut *connection)
                .await?;
            if inserted.rows_affected() == 0 {
                // The row is there (another instance created it first, or it refused the
                // tick), or the tick lies too far ahead.
                return Ok(None);
            }
            (token_of(inserted.last_insert_id())?, true)
        } else {
            match token_of(updated.last_insert_id())? {
                0 => return Ok(None), // held: the IF() left the row alone
                token => (token, false),
            }
        };
        let (token, created) = token;
        let Some((locked_at, lock_until)) =
            lease_times(connection, sql, name, holder, token).await?
        else {
            if created {
                // The row just inserted is not there under its name: the column truncated it.
                return Err(sqlx::Error::Protocol(format!(
                    "the row inserted for lock {name:?} cannot be found by that name; \
                     is the name column of the lock table shorter than the name?"
                )));
            }
            tracing::debug!(
                lock = name,
                token,
                "lease expired and was taken over before its times were read"
            );
            return Ok(None);
        };
        Ok(Some(Acquired {
            token,
            locked_at,
            lock_until,
        }))
    }

    /// The statements' text grows with the batch: 1,000 locks are about 100 KB of it and
    /// 7,000 parameters (of 65,535).
    const MAX_ACQUIRE_BATCH: usize = 1000;

    /// One statement on MariaDB in `READ COMMITTED`, else four in one transaction, whatever
    /// the batch's size (see `batch.rs`).
    async fn acquire_batch<'a>(
        connection: &'a mut MySqlConnection,
        sql: &'a Statements<MySqlStatements>,
        holder: &'a str,
        configs: impl Iterator<Item = &'a LockConfiguration> + Send + 'a,
    ) -> Result<Vec<(String, Acquired)>, sqlx::Error> {
        let configs: Vec<&LockConfiguration> = configs.collect();
        if one_statement(connection, &sql.own).await? {
            return batch::claim_batch(connection, &sql.own.batch, holder, &configs).await;
        }
        batch::acquire_batch(connection, &sql.own.batch, holder, &configs).await
    }

    async fn release(
        connection: &mut MySqlConnection,
        sql: &Statements<MySqlStatements>,
        (): &(),
        args: Lease<'_>,
    ) -> Result<bool, sqlx::Error> {
        let released = sqlx::query(sql.release.clone())
            .bind(micros(args.duration))
            .bind(args.name)
            .bind(args.holder)
            .bind(args.token)
            .execute(connection)
            .await?;
        Ok(released.rows_affected() == 1)
    }

    /// As many as the acquire batch.
    const MAX_RELEASE_BATCH: usize = Self::MAX_ACQUIRE_BATCH;

    async fn release_batch<'a>(
        connection: &'a mut MySqlConnection,
        sql: &'a Statements<MySqlStatements>,
        (): &'a (),
        leases: &'a [Lease<'a>],
    ) -> Result<Option<Vec<String>>, sqlx::Error> {
        if one_statement(connection, &sql.own).await? {
            return batch::release_many(connection, &sql.own.batch, leases)
                .await
                .map(Some);
        }
        batch::release_batch(connection, &sql.own.batch, leases)
            .await
            .map(Some)
    }

    async fn extend(
        connection: &mut MySqlConnection,
        sql: &Statements<MySqlStatements>,
        args: Lease<'_>,
    ) -> Result<Option<NaiveDateTime>, sqlx::Error> {
        let extended = sqlx::query(sql.extend.clone())
            .bind(micros(args.duration))
            .bind(args.name)
            .bind(args.holder)
            .bind(args.token)
            .execute(&mut *connection)
            .await?;
        if extended.rows_affected() == 0 {
            return Ok(None);
        }
        let times = lease_times(connection, sql, args.name, args.holder, args.token).await?;
        Ok(times.map(|(_, until)| until))
    }

    async fn table_columns(
        pool: &MySqlPool,
        table: &Table,
    ) -> Result<Vec<CatalogColumn>, sqlx::Error> {
        let (schema, name) = schema_and_name(table);
        // A unique index whose only column is this one.
        let rows: Vec<(String, String, i64)> = sqlx::query_as(
            "SELECT CAST(LOWER(c.column_name) AS CHAR), CAST(LOWER(c.column_type) AS CHAR), \
             CAST((SELECT COUNT(*) FROM information_schema.statistics s \
               WHERE s.table_schema = c.table_schema AND s.table_name = c.table_name \
               AND s.column_name = c.column_name AND s.non_unique = 0 \
               AND NOT EXISTS (SELECT 1 FROM information_schema.statistics o \
                 WHERE o.table_schema = s.table_schema AND o.table_name = s.table_name \
                 AND o.index_name = s.index_name AND o.column_name <> s.column_name) \
             ) AS SIGNED) \
             FROM information_schema.columns c \
             WHERE c.table_schema = COALESCE(?, DATABASE()) AND c.table_name = ? \
             ORDER BY c.ordinal_position",
        )
        .bind(schema)
        .bind(name)
        .fetch_all(pool)
        .await?;
        Ok(rows
            .into_iter()
            .map(|(name, ty, unique)| (name, ty, unique > 0))
            .collect())
    }

    /// Times in `DATETIME` with milliseconds: a `TIMESTAMP` column converts through the
    /// session time zone (ShedLock's hour-long outage at a DST change), and `DATETIME`
    /// without a fraction drops the milliseconds.
    fn type_fits(kind: ColumnKind, found: &str) -> bool {
        match kind {
            ColumnKind::Text => {
                found.starts_with("varchar") || found.starts_with("char") || found.ends_with("text")
            }
            ColumnKind::Time => {
                ["datetime(3)", "datetime(4)", "datetime(5)", "datetime(6)"].contains(&found)
            }
            ColumnKind::Integer => found.starts_with("bigint"),
        }
    }

    async fn create_schema(pool: &MySqlPool, table: &Table) -> Result<(), sqlx::Error> {
        sqlx::query(trusted_sql(table.create_table_sql(&Self::COLUMN_TYPES)))
            .execute(pool)
            .await?;
        let (schema, name) = schema_and_name(table);
        for (column, definition) in table.added_columns(Self::COLUMN_TYPES.token) {
            let columns: i64 = sqlx::query_scalar(HAS_COLUMN)
                .bind(schema)
                .bind(name)
                .bind(column)
                .fetch_one(pool)
                .await?;
            if columns == 0 {
                let add = add_column(table, "ADD COLUMN", column, &definition);
                match sqlx::query(add).execute(pool).await {
                    // Another instance added it in between.
                    Err(e) if mysql_error_number(&e) == Some(ER_DUP_FIELDNAME) => {}
                    result => result.map(drop)?,
                }
            }
        }
        convert_timestamps(pool, table).await
    }
}

/// ShedLock's MySQL DDL declares the times `TIMESTAMP(3)`, which MySQL converts through each
/// session's time zone and which sqlx will not read as a UTC time: such columns become
/// `DATETIME(3)`. The conversion runs in the server's default time zone, the zone ShedLock's
/// sessions wrote in (its JDBC sessions keep the server's zone unless told otherwise), so
/// every row keeps the time its writer meant.
async fn convert_timestamps(pool: &MySqlPool, table: &Table) -> Result<(), sqlx::Error> {
    let found = MySql::table_columns(pool, table).await?;
    let time_columns = [&table.columns.lock_until, &table.columns.locked_at];
    let modify: Vec<String> = time_columns
        .into_iter()
        .filter(|column| {
            found
                .iter()
                .any(|(name, ty, _)| *name == column.to_lowercase() && ty.starts_with("timestamp"))
        })
        .map(|column| format!("MODIFY {column} {} NOT NULL", MySql::COLUMN_TYPES.time))
        .collect();
    if modify.is_empty() {
        return Ok(());
    }
    tracing::info!(
        table = %table.name,
        "converting ShedLock's TIMESTAMP(3) time columns to DATETIME(3)"
    );
    // A connection of its own, closed afterwards: its session's time zone is changed.
    let mut connection = pool.acquire().await?.detach();
    sqlx::query("SET time_zone = @@global.time_zone")
        .execute(&mut connection)
        .await?;
    let alter = trusted_sql(format!("ALTER TABLE {} {}", table.name, modify.join(", ")));
    let altered = sqlx::query(alter).execute(&mut connection).await;
    let _ = connection.close().await;
    altered.map(drop)
}

/// The table's schema (none: the connection's database) and its name in it.
fn schema_and_name(table: &Table) -> (Option<&str>, &str) {
    match table.name.split_once('.') {
        Some((schema, name)) => (Some(schema), name),
        None => (None, table.name.as_str()),
    }
}

/// The times the table recorded for a lease, if it is still that lease.
async fn lease_times(
    connection: &mut MySqlConnection,
    sql: &Statements<MySqlStatements>,
    name: &str,
    holder: &str,
    token: i64,
) -> Result<Option<(NaiveDateTime, NaiveDateTime)>, sqlx::Error> {
    sqlx::query_as(sql.own.lease_times.clone())
        .bind(name)
        .bind(holder)
        .bind(token)
        .fetch_optional(connection)
        .await
}

/// A fencing token as `LAST_INSERT_ID` reports it (0: no acquisition).
fn token_of(last_insert_id: u64) -> Result<i64, sqlx::Error> {
    i64::try_from(last_insert_id)
        .map_err(|_| sqlx::Error::Protocol(format!("fencing token {last_insert_id} out of range")))
}

/// A duration as bound into `INTERVAL ? MICROSECOND`, in whole milliseconds like the column.
fn micros(duration: Duration) -> i64 {
    lease_millis(duration) * 1000
}

fn mysql_error_number(error: &sqlx::Error) -> Option<u16> {
    let database = error.as_database_error()?;
    Some(database.try_downcast_ref::<MySqlDatabaseError>()?.number())
}

#[cfg(test)]
mod tests {
    use super::has_insert_returning;

    #[test]
    fn insert_returning_from_mariadb_10_5() {
        assert!(has_insert_returning("10.11.19-MariaDB-0+deb12u1"));
        assert!(has_insert_returning("10.5.0-MariaDB"));
        assert!(has_insert_returning("11.4.2-MariaDB-log"));
        assert!(!has_insert_returning("10.4.32-MariaDB"));
        assert!(has_insert_returning("5.5.5-10.11.6-MariaDB"));
        assert!(!has_insert_returning("5.5.5-10.4.6-MariaDB"));
        assert!(!has_insert_returning("8.0.36"));
    }
}
