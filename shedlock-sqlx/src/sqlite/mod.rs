//! The SQLite provider.

mod statements;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDateTime;
use shedlock_core::{Error, LockConfiguration, LockLease, LockProvider, Operation, async_trait};
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{Sqlite, SqlitePool, Transaction};

use crate::common::{
    LockProviderBuilder, Table, check_lock_name, lease_millis, lease_verdict, shared_api,
    store_error, system_time, token_from_db, token_param,
};
use statements::Statements;

/// How long a statement waits for another connection's write lock before `SQLITE_BUSY`.
/// Lock statements hold it for microseconds, so a longer wait means something else holds it.
const BUSY_TIMEOUT: Duration = Duration::from_secs(1);

/// Locks in an SQLite table, with fencing tokens: for single-host deployments, several
/// processes sharing one database file, and tests.
///
/// Every operation is one statement (`INSERT … ON CONFLICT DO UPDATE … WHERE … RETURNING` for
/// acquire). Times are TEXT `YYYY-MM-DD HH:MM:SS.SSS` in UTC from SQLite's `'now'`, with
/// millisecond precision; the "database clock" is the host's clock.
///
/// Several processes on one file need WAL journal mode and a busy timeout, which
/// [`connect`](Self::connect) sets. When another connection holds the write lock longer than the
/// busy timeout, acquire answers "not acquired" (`Ok(None)`, logged at debug level); release and
/// extend report [`Error::Store`].
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
#[derive(Debug, Clone)]
pub struct SqliteLockProvider {
    pool: SqlitePool,
    holder: Arc<str>,
    table: Arc<Table>,
    sql: Arc<Statements>,
}

shared_api!(SqliteLockProvider, SqlitePool);

impl SqliteLockProvider {
    /// Opens a pool suited to locks and returns a default provider on it (table `shedlock`).
    ///
    /// - A file (`sqlite://locks.db`, `sqlite:///var/lib/app/locks.db`): created if missing,
    ///   WAL journal mode, 1 s busy timeout, up to 4 connections. Several processes may share it.
    /// - In memory (`sqlite::memory:`): one connection that is never closed, since the database
    ///   lives only as long as a connection to it. Each call opens a separate database.
    ///
    /// To tune further, build the pool yourself from [`SqliteConnectOptions`] with
    /// `.journal_mode(SqliteJournalMode::Wal).busy_timeout(..)` and use
    /// [`new`](Self::new) or [`builder`](Self::builder).
    ///
    /// # Errors
    /// The sqlx error when the URL is invalid or the database cannot be opened.
    pub async fn connect(url: &str) -> Result<Self, sqlx::Error> {
        let options = SqliteConnectOptions::from_str(url)?;
        if url.contains(":memory:") || url.contains("mode=memory") {
            let pool = SqlitePoolOptions::new()
                .max_connections(1)
                .min_connections(1)
                .idle_timeout(None)
                .max_lifetime(None)
                .connect_with(options)
                .await?;
            return Ok(Self::new(pool));
        }
        let options = options
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(BUSY_TIMEOUT);
        let pool_options = SqlitePoolOptions::new().max_connections(4);
        // Switching a new file to WAL needs an exclusive lock that the busy timeout does not
        // cover: processes starting together retry.
        let mut attempt = 0;
        loop {
            match pool_options.clone().connect_with(options.clone()).await {
                Ok(pool) => return Ok(Self::new(pool)),
                Err(e) if is_busy(&e) && attempt < 20 => {
                    attempt += 1;
                    tokio::time::sleep(Duration::from_millis(25 * attempt)).await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Creates the lock table if it does not exist, and adds the `fencing_token` column to an
    /// older table. Idempotent, and safe to run from several processes at once.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Schema`) when SQLite refuses, e.g. on a read-only file.
    pub async fn create_schema(&self) -> Result<(), Error> {
        let fail = |e| store_error(Operation::Schema, &self.table.name, &self.table, e);
        sqlx::query(self.sql.create_table.clone())
            .execute(&self.pool)
            .await
            .map_err(fail)?;
        let (schema, table) = self
            .table
            .name
            .split_once('.')
            .unwrap_or(("main", &self.table.name));
        let columns: i64 = sqlx::query_scalar(self.sql.has_token_column.clone())
            .bind(table)
            .bind(schema)
            .bind(&self.table.columns.fencing_token)
            .fetch_one(&self.pool)
            .await
            .map_err(fail)?;
        if columns > 0 {
            return Ok(());
        }
        match sqlx::query(self.sql.add_token_column.clone())
            .execute(&self.pool)
            .await
        {
            // Another process added it in between.
            Err(e)
                if e.as_database_error()
                    .is_some_and(|d| d.message().starts_with("duplicate column name")) =>
            {
                Ok(())
            }
            result => result.map(drop).map_err(fail),
        }
    }

    /// The fencing guard for writes to this same database: inside the caller's transaction,
    /// checks that the lease `(lock_name, fencing_token)` is still the live one and takes
    /// SQLite's write lock (the check is a no-op `UPDATE` of the lock row).
    ///
    /// SQLite has one writer at a time, so from here until the transaction ends nobody can take
    /// the lock over, and the caller's writes commit before any later holder's; a holder that
    /// was paused past its lease gets [`Error::LockLost`] and should roll back. Other
    /// connections' lock statements wait meanwhile (up to the busy timeout), so keep the
    /// transaction short. Start it with `pool.begin_with("BEGIN IMMEDIATE")`: a deferred
    /// transaction that already read may fail here with `SQLITE_BUSY` instead.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{Error, LockConfiguration, LockProvider};
    /// use shedlock_sqlx::SqliteLockProvider;
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let provider = SqliteLockProvider::connect("sqlite::memory:").await?;
    /// provider.create_schema().await?;
    /// sqlx::query("CREATE TABLE report (day TEXT)").execute(provider.pool()).await?;
    /// let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO)?;
    /// let lease = provider.acquire(&config).await?.expect("free");
    ///
    /// let mut tx = provider.pool().begin_with("BEGIN IMMEDIATE").await?;
    /// provider.verify_lease(&mut tx, lease.name(), lease.fencing_token()).await?;
    /// sqlx::query("INSERT INTO report VALUES ('2025-06-01')").execute(&mut *tx).await?;
    /// tx.commit().await?;
    ///
    /// // Once the lease is gone, a write carrying its token is refused.
    /// provider.release(&lease).await?;
    /// let mut tx = provider.pool().begin_with("BEGIN IMMEDIATE").await?;
    /// let refused = provider.verify_lease(&mut tx, lease.name(), lease.fencing_token()).await;
    /// assert!(matches!(refused, Err(Error::LockLost { .. })));
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::LockLost`] when the lease expired, was released or was taken over;
    /// [`Error::Store`] (`Operation::Read`) when the statement fails, e.g. `SQLITE_BUSY`.
    pub async fn verify_lease(
        &self,
        tx: &mut Transaction<'_, Sqlite>,
        lock_name: &str,
        fencing_token: u64,
    ) -> Result<(), Error> {
        let live = match token_param(fencing_token) {
            Some(token) => {
                sqlx::query(self.sql.verify.clone())
                    .bind(lock_name)
                    .bind(token)
                    .execute(&mut **tx)
                    .await
                    .map_err(|e| store_error(Operation::Read, lock_name, &self.table, e))?
                    .rows_affected()
                    == 1
            }
            None => false,
        };
        lease_verdict(live, lock_name)
    }
}

impl LockProviderBuilder<SqlitePool> {
    /// Validates the configuration and builds the provider.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field: `table`, `columns.*` or `holder`.
    pub fn build(self) -> Result<SqliteLockProvider, Error> {
        let (pool, table, holder) = self.validate()?;
        Ok(SqliteLockProvider {
            pool,
            holder,
            sql: Arc::new(Statements::new(&table)),
            table: Arc::new(table),
        })
    }
}

/// A duration as an SQLite date modifier, in whole milliseconds: `+600.000 seconds`.
fn modifier(duration: Duration) -> String {
    let millis = lease_millis(duration);
    format!("+{}.{:03} seconds", millis / 1000, millis % 1000)
}

/// A duration back in time as an SQLite date modifier: `-0.250 seconds`.
fn modifier_back(duration: Duration) -> String {
    let millis = lease_millis(duration);
    format!("-{}.{:03} seconds", millis / 1000, millis % 1000)
}

/// `SQLITE_BUSY` or `SQLITE_LOCKED` (with any extended code): another connection holds a lock.
fn is_busy(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|d| d.code()?.parse::<i32>().ok())
        .is_some_and(|code| matches!(code & 0xff, 5 | 6))
}

#[async_trait]
impl LockProvider for SqliteLockProvider {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        let name = config.name();
        check_lock_name(name)?;
        let row: Option<(i64, NaiveDateTime, NaiveDateTime)> = match sqlx::query_as(
            self.sql.acquire.clone(),
        )
        .bind(name)
        .bind(&*self.holder)
        .bind(modifier(config.lock_at_most_for()))
        .bind(modifier_back(config.acquired_within_window()))
        .fetch_optional(&self.pool)
        .await
        {
            Ok(row) => row,
            Err(e) if is_busy(&e) => {
                tracing::debug!(lock = name, error = %e, "SQLite busy: lock not acquired this time");
                return Ok(None);
            }
            Err(e) => return Err(store_error(Operation::Acquire, name, &self.table, e)),
        };
        let Some((token, locked_at, lock_until)) = row else {
            return Ok(None);
        };
        let token = token_from_db(token).map_err(|e| Error::store(Operation::Acquire, name, e))?;
        Ok(Some(LockLease::new(
            config,
            Arc::clone(&self.holder),
            token,
            system_time(locked_at),
            system_time(lock_until),
        )))
    }

    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        let Some(token) = token_param(lease.fencing_token()) else {
            return Ok(false);
        };
        let released = sqlx::query(self.sql.release.clone())
            .bind(lease.name())
            .bind(&*self.holder)
            .bind(token)
            .bind(modifier(lease.lock_at_least_for()))
            .execute(&self.pool)
            .await
            .map_err(|e| store_error(Operation::Release, lease.name(), &self.table, e))?;
        Ok(released.rows_affected() == 1)
    }

    async fn extend(
        &self,
        lease: &LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<LockLease>, Error> {
        let Some(token) = token_param(lease.fencing_token()) else {
            return Ok(None);
        };
        let lock_until: Option<NaiveDateTime> = sqlx::query_scalar(self.sql.extend.clone())
            .bind(lease.name())
            .bind(&*self.holder)
            .bind(token)
            .bind(modifier(lock_at_most_for))
            .fetch_optional(&self.pool)
            .await
            .map_err(|e| store_error(Operation::Extend, lease.name(), &self.table, e))?;
        Ok(lock_until
            .map(|until| lease.extended(system_time(until), lock_at_most_for, lock_at_least_for)))
    }

    fn holder(&self) -> &str {
        &self.holder
    }
}

#[cfg(test)]
mod tests {
    use super::statements::COLUMN_TYPES;
    use super::*;

    #[test]
    fn sql_file_matches_the_generated_table() {
        let (_, table, _) = LockProviderBuilder::new(()).validate().unwrap();
        let generated = table.create_table_sql(&COLUMN_TYPES);
        let file = include_str!("../../sql/sqlite.sql");
        assert!(
            file.contains(&generated),
            "sql/sqlite.sql differs from:\n{generated}"
        );
    }

    #[test]
    fn modifiers_are_whole_milliseconds() {
        assert_eq!(modifier(Duration::from_millis(800)), "+0.800 seconds");
        assert_eq!(modifier(Duration::from_micros(1_000_001)), "+1.001 seconds");
        assert_eq!(modifier(Duration::from_secs(600)), "+600.000 seconds");
    }
}
