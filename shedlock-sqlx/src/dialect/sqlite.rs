//! SQLite.
//!
//! Times are TEXT `YYYY-MM-DD HH:MM:SS.SSS` in UTC (`strftime('%Y-%m-%d %H:%M:%f', 'now')`), so
//! text order is time order. SQLite reads `'now'` once per statement step, and date arithmetic
//! runs on whole milliseconds, so `lock_until - locked_at` is exactly the lease. Stored times
//! are re-read through `strftime`, so rows written by hand in any format SQLite understands
//! (`2025-01-01T10:00:00Z`, …) compare correctly; a time SQLite cannot read counts as held,
//! never as expired.
//! Durations are bound as modifiers such as `+600.000 seconds`.

mod runs;

use std::str::FromStr;
use std::time::{Duration, SystemTime};

use chrono::NaiveDateTime;
use shedlock_core::{Error, LockConfiguration};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Sqlite as SqliteDb, SqliteConnection, SqlitePool};

use crate::dialect::{
    AcquiredRow, Driver, Statements, TickBounds, add_column, identifiers, sealed::Sealed,
};
use crate::{
    Acquire, Acquired, CatalogColumn, ColumnKind, ColumnTypes, Dialect, Lease, SqlLockProvider,
    Table, lease_millis, trusted_sql,
};

/// How long a statement waits for another connection's write lock before `SQLITE_BUSY`: sqlx's
/// own default. Lock statements hold it for microseconds, but on a loaded host the processes
/// sharing the file queue for it at every tick; a shorter wait lost ticks there (1 s did, on
/// this project's 2-core CI beside a build). A tick's acquisition window is taken before the
/// wait, so a late answer is still refused where another instance ran the tick.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Connections of a pool `connect` opens on a file: SQLite has one writer at a time, so more
/// would only wait.
const FILE_CONNECTIONS: u32 = 4;

/// Locks in an SQLite table, with fencing tokens: for single-host deployments, several
/// processes sharing one database file, and tests.
///
/// Every operation is one statement (`INSERT … ON CONFLICT DO UPDATE … WHERE … RETURNING` for
/// acquire). Times are TEXT `YYYY-MM-DD HH:MM:SS.SSS` in UTC from SQLite's `'now'`, with
/// millisecond precision; the "database clock" is the host's clock. A batch (`acquire_many`, or
/// acquires that queued while every connection was busy) is one statement too: the same upsert
/// over a `VALUES` list of the locks, each row with its own conditions: one wait for the write
/// lock and one commit.
///
/// [`connect`](SqlLockProvider::connect) sets up what several processes on one file need:
///
/// - A file (`sqlite://locks.db`, `sqlite:///var/lib/app/locks.db`): created if missing, WAL
///   journal mode, 5 s busy timeout, a pool of up to 4 connections, and up to 4 connections
///   of the provider's own for lock statements (see
///   [`dedicated_connections`](crate::SqlLockProviderBuilder::dedicated_connections)).
/// - In memory (`sqlite::memory:`): one connection that is never closed, since the database
///   lives only as long as a connection to it, and no connections of the provider's own. Each
///   call opens a separate database.
///
/// To tune further, build the pool yourself from [`SqliteConnectOptions`] with
/// `.journal_mode(SqliteJournalMode::Wal).busy_timeout(..)` and use
/// [`new`](SqlLockProvider::new) or [`builder`](SqlLockProvider::builder).
///
/// When another connection holds the write lock longer than the busy timeout, acquire answers
/// "not acquired" (`Ok(None)`, logged at debug level); release and extend report
/// [`Error::Store`](shedlock_core::Error::Store).
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{LockConfiguration, LockProvider};
/// use shedlock_sqlx::SqliteLockProvider;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let provider = SqliteLockProvider::connect("sqlite::memory:").await?;
/// provider.create_schema().await?;
/// let config = LockConfiguration::new("nightly_report", Duration::from_secs(600), Duration::ZERO)?;
/// let lease = provider.acquire(&config).await?.expect("the lock is free");
/// assert!(provider.with_holder("other")?.acquire(&config).await?.is_none());
/// assert!(provider.release(&lease).await?);
/// # Ok(())
/// # }
/// ```
pub type SqliteLockProvider = SqlLockProvider<Sqlite>;

/// The SQLite [`Dialect`].
#[derive(Debug, Clone, Copy)]
pub struct Sqlite;

impl Sealed for Sqlite {}

const FORMAT: &str = "'%Y-%m-%d %H:%M:%f'";

/// The clock in [`FORMAT`].
const NOW: &str = "strftime('%Y-%m-%d %H:%M:%f', 'now')";

/// `?1` table, `?2` schema, `?3` column: whether the column exists.
const HAS_COLUMN: &str =
    "SELECT count(*) FROM pragma_table_info(?1, ?2) WHERE lower(name) = lower(?3)";

/// The statements only SQLite has.
#[doc(hidden)]
#[derive(Debug)]
pub struct SqliteStatements {
    /// `{rows}`: one `(?, ?, ?, ?, ?, ?)` per lock (name, lease modifier, window bound or
    /// NULL, tick, latest last tick, earliest clock ms), then `?` the holder: a row (name,
    /// token, locked_at, lock_until) per lock taken.
    acquire_batch: String,
    /// `{rows}`: one `(?, ?, ?)` per lease (name, token, lock_at_least_for modifier), then `?`
    /// the holder: a row (name) per lease released.
    release_batch: String,
}

impl Dialect for Sqlite {
    type Database = SqliteDb;
    type OwnStatements = SqliteStatements;
    type Options = ();
    type State = ();
    type Runs = runs::SqliteRuns;

    /// Times as TEXT in the format above.
    const COLUMN_TYPES: ColumnTypes = ColumnTypes {
        name: "VARCHAR(64)",
        time: "TEXT",
        token: "INTEGER",
    };

    const NOW: &'static str = NOW;

    /// `acquire`: `?1` name, `?2` holder, `?3` lease modifier, `?4` NULL or a time (refused if
    /// acquired later), `?5` to `?7` the tick's bounds (`TickBounds`: tick or NULL, latest
    /// last tick, earliest clock in ms): one row (token, locked_at, lock_until) if acquired.
    /// `release`: `?1` name, `?2` holder, `?3` token, `?4` lock_at_least_for modifier: 1 row
    /// changed if released. `extend`: the same with the lease modifier: one row (lock_until)
    /// if extended. `verify`: `?1` name, `?2` holder, `?3` token: 1 row changed if that lease
    /// is live. A write, so the caller's transaction holds the database's write lock from here
    /// on. `lock_state`: `?1` name.
    fn statements(table: &Table) -> Statements<SqliteStatements> {
        let [t, name, until, at, by, token, last] = identifiers(table);
        let now = NOW;
        // A time SQLite cannot read is never taken for expired: the lock is held (never a grant
        // on a value nobody can read), and inspection reports the row as unreadable.
        let stored_until =
            format!("ifnull(strftime({FORMAT}, l.{until}), '9999-12-31 23:59:59.999')");
        // The clock in milliseconds since 1970 (SQLite's resolution), for ticks; in
        // microseconds, the floor of every token ("Token floor" in `values.rs`). 'now' is the
        // same instant throughout one statement.
        let clock_millis = "(CAST(strftime('%s', 'now') AS INTEGER) * 1000 \
             + CAST(substr(strftime('%f', 'now'), 4) AS INTEGER))";
        let clock_micros = format!("({clock_millis} * 1000)");
        // Past i64::MAX SQLite would turn the token into a float; NULL there makes the NOT NULL
        // column refuse the update with an error instead.
        let next_token = format!(
            "CASE WHEN ifnull(l.{token}, 0) < 9223372036854775807 \
             THEN max(max(ifnull(l.{token}, 0), 0) + 1, {clock_micros}) END"
        );
        // A tick too far ahead of the clock proposes no row, so neither inserts nor updates
        // one; the last tick is checked against the row's, and kept on a grant (NULL: the
        // row's stays). The `WHERE` also tells SQLite's parser where the `SELECT` ends.
        let acquire = format!(
            "INSERT INTO {t} AS l ({name}, {until}, {at}, {by}, {token}, {last}) \
             SELECT ?1, strftime({FORMAT}, 'now', ?3), {now}, ?2, {clock_micros}, ?5 \
             WHERE {clock_millis} >= ?7 \
             ON CONFLICT ({name}) DO UPDATE SET {until} = excluded.{until}, \
             {at} = excluded.{at}, {by} = excluded.{by}, {token} = {next_token}, \
             {last} = ifnull(excluded.{last}, l.{last}) \
             WHERE {stored_until} <= excluded.{at} \
             AND (?4 IS NULL OR ifnull(strftime({FORMAT}, l.{at}), '') <= ?4) \
             AND (l.{last} IS NULL OR l.{last} <= ?6) \
             RETURNING {token}, {at}, {until}"
        );
        // The batch: the same statement over `{rows}` (a `VALUES` list of name, lease modifier,
        // window bound, tick, latest last tick, earliest clock; bound first, then the holder),
        // each row's own conditions read from the list by the proposed row's name. One
        // statement, so atomic without a transaction; `RETURNING` gives the rows taken.
        let acquire_batch = format!(
            "WITH b(lock_name, lease, window_before, tick, latest_last, earliest_now) AS \
             (VALUES {{rows}}) \
             INSERT INTO {t} AS l ({name}, {until}, {at}, {by}, {token}, {last}) \
             SELECT b.lock_name, strftime({FORMAT}, 'now', b.lease), {now}, ?, {clock_micros}, \
             b.tick FROM b WHERE {clock_millis} >= b.earliest_now \
             ON CONFLICT ({name}) DO UPDATE SET {until} = excluded.{until}, \
             {at} = excluded.{at}, {by} = excluded.{by}, {token} = {next_token}, \
             {last} = ifnull(excluded.{last}, l.{last}) \
             WHERE {stored_until} <= excluded.{at} \
             AND (SELECT (w.window_before IS NULL \
             OR ifnull(strftime({FORMAT}, l.{at}), '') <= w.window_before) \
             AND (l.{last} IS NULL OR l.{last} <= w.latest_last) \
             FROM b AS w WHERE w.lock_name = excluded.{name}) \
             RETURNING {name}, {token}, {at}, {until}"
        );
        let owned_and_live =
            format!("l.{name} = ?1 AND l.{by} = ?2 AND l.{token} = ?3 AND {stored_until} > {now}");
        let release = format!(
            "UPDATE {t} AS l SET {until} = max(ifnull(strftime({FORMAT}, l.{at}, ?4), ''), {now}) \
             WHERE {owned_and_live}"
        );
        let extend = format!(
            "UPDATE {t} AS l SET {until} = strftime({FORMAT}, 'now', ?4) WHERE {owned_and_live} \
             RETURNING {until}"
        );
        let verify = format!(
            "UPDATE {t} AS l SET {token} = l.{token} \
             WHERE l.{name} = ?1 AND l.{by} = ?2 AND l.{token} = ?3 AND {stored_until} > {now}"
        );
        let select_rows = format!(
            "SELECT l.{name}, strftime({FORMAT}, l.{until}), strftime({FORMAT}, l.{at}), l.{by}, \
             ifnull(l.{token}, 0), db.now \
             FROM {t} AS l, (SELECT {now} AS now) AS db"
        );
        Statements {
            acquire: trusted_sql(acquire),
            release: trusted_sql(release),
            extend: trusted_sql(extend),
            verify: trusted_sql(verify),
            lock_state: trusted_sql(format!("{select_rows} WHERE l.{name} = ?1")),
            list_locks: trusted_sql(format!("{select_rows} ORDER BY l.{name}")),
            own: SqliteStatements {
                acquire_batch,
                // `{rows}` (name, token, lock_at_least_for modifier) come first in the text,
                // so they bind first; then the holder. RETURNING names the updated table's
                // column unqualified (SQLite refuses its alias there).
                release_batch: format!(
                    "UPDATE {t} AS l \
                     SET {until} = max(ifnull(strftime({FORMAT}, l.{at}, b.column3), ''), {now}) \
                     FROM (VALUES {{rows}}) AS b \
                     WHERE l.{name} = b.column1 AND l.{token} = b.column2 AND l.{by} = ? \
                     AND {stored_until} > {now} RETURNING {name}"
                ),
            },
        }
    }

    fn state((): (), _: &Table) -> Result<(), Error> {
        Ok(())
    }

    async fn connect(url: &str) -> Result<SqlitePool, sqlx::Error> {
        let options = SqliteConnectOptions::from_str(url)?;
        if is_in_memory(&options) {
            return SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await;
        }
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(BUSY_TIMEOUT);
        let pool_options = SqlitePoolOptions::new()
            .max_connections(FILE_CONNECTIONS)
            .test_before_acquire(false);
        // Switching a new file to WAL needs an exclusive lock that the busy timeout does not
        // cover: processes starting together retry.
        let mut attempt = 0;
        loop {
            match pool_options.clone().connect_with(options.clone()).await {
                Err(e) if is_busy(&e) && attempt < 20 => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(25 * attempt)).await;
                }
                result => return result,
            }
        }
    }

    /// 4 on a file (one writer at a time: more would only wait for it); none for an in-memory
    /// database, where a connection taken out of its pool would be the only one keeping the
    /// database alive, or a new empty database.
    fn default_dedicated_connections(pool: &SqlitePool) -> usize {
        if is_in_memory(&pool.connect_options()) {
            0
        } else {
            FILE_CONNECTIONS as usize
        }
    }

    async fn acquire(
        connection: &mut SqliteConnection,
        sql: &Statements<SqliteStatements>,
        args: Acquire<'_>,
    ) -> Result<Option<Acquired>, sqlx::Error> {
        // Read to the end: the autocommit COMMIT runs after the `RETURNING` row, and can fail
        // (a reader in rollback-journal mode, a full disk). Stopping at the first row would
        // report a lease that was rolled back.
        let (lease, window) = (
            modifier(args.lock_at_most_for()),
            acquired_before(args.window()),
        );
        let acquire = SqliteDb::acquire_arguments(&args, lease, window)?;
        let row: Option<AcquiredRow> =
            SqliteDb::single_row(connection, &sql.acquire, acquire).await?;
        Ok(row.map(Acquired::from))
    }

    /// One statement for the whole batch (SQLite's limit of 32,766 parameters leaves room).
    const MAX_ACQUIRE_BATCH: usize = 1000;

    /// One statement: atomic on its own, one wait for the write lock, one commit. Each window
    /// is read when binding, after the wait for a connection (a later wait for the write lock
    /// only makes the window's bound earlier than it could be: never a grant within it).
    async fn acquire_batch<'a>(
        connection: &'a mut SqliteConnection,
        sql: &'a Statements<SqliteStatements>,
        holder: &'a str,
        configs: impl Iterator<Item = &'a LockConfiguration> + Send + 'a,
    ) -> Result<Vec<(String, Acquired)>, sqlx::Error> {
        let configs: Vec<&LockConfiguration> = configs.collect();
        if configs.is_empty() {
            return Ok(Vec::new());
        }
        let rows = vec!["(?, ?, ?, ?, ?, ?)"; configs.len()].join(", ");
        let statement = trusted_sql(sql.own.acquire_batch.replace("{rows}", &rows));
        let mut query = sqlx::query_as::<_, (String, i64, NaiveDateTime, NaiveDateTime)>(statement);
        for config in &configs {
            let tick = TickBounds::of(config);
            query = query
                .bind(config.name())
                .bind(modifier(config.lock_at_most_for()))
                .bind(acquired_before(config.acquired_within_window()))
                .bind(tick.tick)
                .bind(tick.latest_last)
                .bind(tick.earliest_now);
        }
        // Read to the end, as a single acquire: the commit comes after the last row.
        let won = query.bind(holder).fetch_all(connection).await?;
        Ok(won
            .into_iter()
            .map(|(name, token, locked_at, lock_until)| {
                (name, Acquired::from((token, locked_at, lock_until)))
            })
            .collect())
    }

    async fn release(
        connection: &mut SqliteConnection,
        sql: &Statements<SqliteStatements>,
        (): &(),
        args: Lease<'_>,
    ) -> Result<bool, sqlx::Error> {
        let lease = SqliteDb::lease_arguments(&args, modifier(args.duration))?;
        let released = sqlx::query_with(sql.release.clone(), lease)
            .execute(connection)
            .await?;
        Ok(released.rows_affected() == 1)
    }

    /// As many as a statement's parameters allow with room to spare (SQLite's default limit
    /// is 32,766).
    const MAX_RELEASE_BATCH: usize = 1000;

    async fn release_batch<'a>(
        connection: &'a mut SqliteConnection,
        sql: &'a Statements<SqliteStatements>,
        (): &'a (),
        leases: &'a [Lease<'a>],
    ) -> Result<Option<Vec<String>>, sqlx::Error> {
        let Some(holder) = leases.first().map(|lease| lease.holder) else {
            return Ok(Some(Vec::new()));
        };
        let rows = vec!["(?, ?, ?)"; leases.len()].join(", ");
        let statement = trusted_sql(sql.own.release_batch.replace("{rows}", &rows));
        let mut query = sqlx::query_scalar::<_, String>(statement);
        for lease in leases {
            query = query
                .bind(lease.name)
                .bind(lease.token)
                .bind(modifier(lease.duration));
        }
        query.bind(holder).fetch_all(connection).await.map(Some)
    }

    async fn extend(
        connection: &mut SqliteConnection,
        sql: &Statements<SqliteStatements>,
        args: Lease<'_>,
    ) -> Result<Option<NaiveDateTime>, sqlx::Error> {
        // Read to the end, as in `acquire`: an extension whose COMMIT failed is no extension.
        let lease = SqliteDb::lease_arguments(&args, modifier(args.duration))?;
        let row = SqliteDb::single_row(connection, &sql.extend, lease).await?;
        Ok(row.map(|(lock_until,)| lock_until))
    }

    async fn verify(
        connection: &mut SqliteConnection,
        sql: &Statements<SqliteStatements>,
        name: &str,
        holder: &str,
        token: i64,
    ) -> Result<bool, sqlx::Error> {
        let verified = sqlx::query(sql.verify.clone())
            .bind(name)
            .bind(holder)
            .bind(token)
            .execute(connection)
            .await?;
        Ok(verified.rows_affected() == 1)
    }

    async fn table_columns(
        pool: &SqlitePool,
        table: &Table,
    ) -> Result<Vec<CatalogColumn>, sqlx::Error> {
        let (schema, name) = table.name.split_once('.').unwrap_or(("main", &table.name));
        // A unique, non-partial index (the primary key's among them) on this column alone.
        sqlx::query_as(
            "SELECT lower(c.name), lower(c.type), EXISTS (SELECT 1 FROM pragma_index_list(?1, ?2) i \
             WHERE i.\"unique\" = 1 AND i.partial = 0 \
             AND (SELECT count(*) FROM pragma_index_info(i.name, ?2)) = 1 \
             AND (SELECT k.name FROM pragma_index_info(i.name, ?2) k) = c.name) \
             FROM pragma_table_info(?1, ?2) c ORDER BY c.cid",
        )
        .bind(name)
        .bind(schema)
        .fetch_all(pool)
        .await
    }

    /// SQLite keeps text as text in a column of any declared type; only the integers (token,
    /// last tick) need integer affinity, or they would be stored and compared as text.
    fn type_fits(kind: ColumnKind, found: &str) -> bool {
        kind != ColumnKind::Integer || found.contains("int")
    }

    async fn create_schema(pool: &SqlitePool, table: &Table) -> Result<(), sqlx::Error> {
        sqlx::query(trusted_sql(table.create_table_sql(&Self::COLUMN_TYPES)))
            .execute(pool)
            .await?;
        let (schema, name) = table.name.split_once('.').unwrap_or(("main", &table.name));
        for (column, definition) in table.added_columns(Self::COLUMN_TYPES.token) {
            let columns: i64 = sqlx::query_scalar(HAS_COLUMN)
                .bind(name)
                .bind(schema)
                .bind(column)
                .fetch_one(pool)
                .await?;
            if columns > 0 {
                continue;
            }
            let add = add_column(table, "ADD COLUMN", column, &definition);
            match sqlx::query(add).execute(pool).await {
                // Another process added it in between.
                Err(e)
                    if e.as_database_error()
                        .is_some_and(|d| d.message().starts_with("duplicate column name")) => {}
                result => result.map(drop)?,
            }
        }
        Ok(())
    }

    fn is_busy(error: &sqlx::Error) -> bool {
        is_busy(error)
    }
}

/// Whether the options open an in-memory database (`sqlite::memory:`, `mode=memory`). sqlx 0.9
/// has no getter for it and its `to_url_lossy` panics on in-memory names, so this reads the
/// options' `Debug` form.
fn is_in_memory(options: &SqliteConnectOptions) -> bool {
    format!("{options:?}").contains("in_memory: true")
}

/// A duration as an SQLite date modifier, in whole milliseconds: `+600.000 seconds`.
fn modifier(duration: Duration) -> String {
    let millis = lease_millis(duration);
    format!("+{}.{:03} seconds", millis / 1000, millis % 1000)
}

/// The acquisition window as the time before which the last acquisition must lie, read on
/// this process's clock — SQLite's own clock, since SQLite runs in this process — before the
/// statement waits for the database's write lock, so that a busy wait never shortens it. `None`
/// for no window.
fn acquired_before(window: Duration) -> Option<String> {
    if window.is_zero() {
        return None;
    }
    let Some(cutoff) = SystemTime::now().checked_sub(window) else {
        // Before any time SQLite can hold: every acquisition is within the window.
        return Some("0000-01-01 00:00:00.000".to_owned());
    };
    Some(
        chrono::DateTime::<chrono::Utc>::from(cutoff)
            .format("%Y-%m-%d %H:%M:%S%.3f")
            .to_string(),
    )
}

/// `SQLITE_BUSY` or `SQLITE_LOCKED` (with any extended code): another connection holds a lock.
fn is_busy(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|d| d.code()?.parse::<i32>().ok())
        .is_some_and(|code| matches!(code & 0xff, 5 | 6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn schema_sql_is_what_the_sql_file_holds() {
        let provider = SqlLockProvider::<Sqlite>::connect("sqlite::memory:")
            .await
            .unwrap();
        assert!(include_str!("../../sql/sqlite.sql").contains(&provider.schema_sql()));
        let custom = SqlLockProvider::<Sqlite>::builder(provider.pool().clone())
            .table("locks")
            .build()
            .unwrap();
        assert!(
            custom
                .schema_sql()
                .starts_with("CREATE TABLE IF NOT EXISTS locks (")
        );
    }

    #[test]
    fn modifiers_are_whole_milliseconds() {
        assert_eq!(modifier(Duration::from_millis(800)), "+0.800 seconds");
        assert_eq!(modifier(Duration::from_micros(1_000_001)), "+1.001 seconds");
        assert_eq!(modifier(Duration::from_secs(600)), "+600.000 seconds");
    }

    #[test]
    fn in_memory_databases_are_recognised() {
        let memory = SqliteConnectOptions::from_str("sqlite::memory:").unwrap();
        let named = SqliteConnectOptions::from_str("sqlite://locks?mode=memory").unwrap();
        let file = SqliteConnectOptions::from_str("sqlite://locks.db").unwrap();
        assert!(is_in_memory(&memory) && is_in_memory(&named) && !is_in_memory(&file));
    }
}
