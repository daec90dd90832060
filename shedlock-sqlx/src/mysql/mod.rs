//! The MySQL and MariaDB provider.

mod statements;

use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDateTime;
use shedlock_core::{Error, LockConfiguration, LockLease, LockProvider, Operation, async_trait};
use sqlx::mysql::MySqlDatabaseError;
use sqlx::{MySql, MySqlPool, Transaction};

use crate::common::{
    DedicatedConnections, LockConnection, LockProviderBuilder, Table, check_lock_name,
    lease_millis, lease_verdict, shared_api, store_error, system_time, token_param,
};
use statements::Statements;

/// MySQL's error number for "Duplicate column name".
const ER_DUP_FIELDNAME: u16 = 1060;

/// Locks in a MySQL or MariaDB table, on the database's clock, with fencing tokens.
///
/// Times are `DATETIME(3)` in UTC from `UTC_TIMESTAMP(3)`. sqlx connects with
/// `CLIENT_FOUND_ROWS` and neither MySQL nor MariaDB can return values from an `UPDATE`, so the
/// statements differ from PostgreSQL's (round trips, all autocommit):
///
/// | operation | lock free | lock held | first use of the name |
/// |---|---|---|---|
/// | acquire | 2: conditional `UPDATE` (token via `LAST_INSERT_ID`) + `SELECT` of the times | 1 | 3: `UPDATE`, `INSERT IGNORE`, `SELECT` |
///
/// Release is one `UPDATE`; extend is an `UPDATE` and a `SELECT` of the new `lock_until`.
/// Every attempt starts from the table, so a row deleted by hand is recreated by the next one.
///
/// Lock names compare case-sensitively in a table made by [`create_schema`](Self::create_schema)
/// (`utf8mb4_bin`); in a ShedLock table with the default collation, `Job` and `job` are one
/// lock. ShedLock's MySQL DDL uses `TIMESTAMP(3)` columns: those are only correct when the
/// session time zone is UTC, so convert them to `DATETIME(3)` (see `sql/mysql.sql`).
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_core::{LockConfiguration, LockProvider};
/// use shedlock_sqlx::MySqlLockProvider;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = sqlx::MySqlPool::connect("mysql://root@localhost/app").await?;
/// let provider = MySqlLockProvider::new(pool);
/// provider.create_schema().await?;
/// let config = LockConfiguration::new("nightly_report", Duration::from_secs(600), Duration::ZERO)?;
/// if let Some(lease) = provider.acquire(&config).await? {
///     println!("running with fencing token {}", lease.fencing_token());
///     provider.release(&lease).await?;
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct MySqlLockProvider {
    pool: MySqlPool,
    connections: Arc<DedicatedConnections<MySql>>,
    holder: Arc<str>,
    table: Arc<Table>,
    sql: Arc<Statements>,
}

shared_api!(MySqlLockProvider, MySqlPool);

impl MySqlLockProvider {
    /// Creates the lock table if it does not exist, and adds the `fencing_token` column to a
    /// table created by ShedLock. Idempotent, and safe to run from several instances at once.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Schema`) when the database refuses, e.g. for lack of rights.
    pub async fn create_schema(&self) -> Result<(), Error> {
        let fail = |e| store_error(Operation::Schema, &self.table.name, &self.table, e);
        sqlx::query(self.sql.create_table.clone())
            .execute(&self.pool)
            .await
            .map_err(fail)?;
        let (schema, table) = match self.table.name.split_once('.') {
            Some((schema, table)) => (Some(schema), table),
            None => (None, self.table.name.as_str()),
        };
        let columns: i64 = sqlx::query_scalar(self.sql.has_token_column.clone())
            .bind(schema)
            .bind(table)
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
            // Another instance added it in between.
            Err(e) if mysql_error_number(&e) == Some(ER_DUP_FIELDNAME) => Ok(()),
            result => result.map(drop).map_err(fail),
        }
    }

    /// The fencing guard for writes to this same database: inside the caller's transaction,
    /// checks that the lease `(lock_name, fencing_token)` is still the live one (database clock)
    /// and share-locks its row until the transaction ends.
    ///
    /// While the row is locked nobody can take the lock over, so the caller's writes commit
    /// before any later holder's; a holder that was paused past its lease gets
    /// [`Error::LockLost`] here and should roll back. Takeover, release and extension of this
    /// lock wait for the transaction (up to `innodb_lock_wait_timeout`), so keep it short.
    ///
    /// ```no_run
    /// # use shedlock_sqlx::MySqlLockProvider;
    /// # async fn job(provider: &MySqlLockProvider, lock: &shedlock_core::LockContext) -> Result<(), Box<dyn std::error::Error>> {
    /// let mut tx = provider.pool().begin().await?;
    /// provider.verify_lease(&mut tx, lock.name(), lock.fencing_token()).await?;
    /// sqlx::query("UPDATE accounts SET balance = balance * 1.01").execute(&mut *tx).await?;
    /// tx.commit().await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::LockLost`] when the lease expired, was released or was taken over;
    /// [`Error::Store`] (`Operation::Read`) when the query fails.
    pub async fn verify_lease(
        &self,
        tx: &mut Transaction<'_, MySql>,
        lock_name: &str,
        fencing_token: u64,
    ) -> Result<(), Error> {
        let live = match token_param(fencing_token) {
            Some(token) => sqlx::query(self.sql.verify.clone())
                .bind(lock_name)
                .bind(token)
                .fetch_optional(&mut **tx)
                .await
                .map_err(|e| store_error(Operation::Read, lock_name, &self.table, e))?
                .is_some(),
            None => false,
        };
        lease_verdict(live, lock_name)
    }

    /// The times the table recorded for a lease, if it is still that lease.
    async fn lease_times(
        &self,
        connection: &mut LockConnection<'_, MySql>,
        operation: Operation,
        name: &str,
        token: i64,
    ) -> Result<Option<(NaiveDateTime, NaiveDateTime)>, Error> {
        let times = sqlx::query_as(self.sql.lease_times.clone())
            .bind(name)
            .bind(&*self.holder)
            .bind(token)
            .fetch_optional(connection.connection())
            .await;
        connection.finish(&times);
        times.map_err(|e| store_error(operation, name, &self.table, e))
    }
}

impl LockProviderBuilder<MySqlPool> {
    /// Runs the lock statements (acquire, release, extend) on up to `connections` connections
    /// that the provider and its clones keep open, instead of checking a connection out of the
    /// pool for each statement; default 0 (always the pool).
    ///
    /// sqlx pings a connection on every return to the pool (and, with its default
    /// `test_before_acquire(true)`, on every checkout): a kept connection needs neither ping.
    /// That matters under load, e.g. many jobs, or one provider shared by a busy service: see
    /// `BENCHMARKS.md` for the measured effect.
    ///
    /// - The connections come from the pool and are detached from it: they count in addition
    ///   to its `max_connections`, and the pool's `after_connect` set them up.
    /// - When all are busy, a statement uses the pool as before: nothing waits for them.
    /// - One idle for 30 s is pinged before use; one whose statement failed on the connection
    ///   (not in the database) or was cancelled is closed, and replaced when needed.
    /// - They are closed at the next operation after the pool was closed, and when the
    ///   provider and all its clones are dropped.
    pub fn dedicated_connections(mut self, connections: usize) -> Self {
        self.dedicated_connections = connections;
        self
    }

    /// Validates the configuration and builds the provider.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field: `table`, `columns.*` or `holder`.
    pub fn build(self) -> Result<MySqlLockProvider, Error> {
        let dedicated = self.dedicated_connections;
        let (pool, table, holder) = self.validate()?;
        Ok(MySqlLockProvider {
            pool,
            connections: Arc::new(DedicatedConnections::new(dedicated)),
            holder,
            sql: Arc::new(Statements::new(&table)),
            table: Arc::new(table),
        })
    }
}

/// A duration as bound into `INTERVAL ? MICROSECOND`, in whole milliseconds like the column.
fn micros(duration: Duration) -> i64 {
    lease_millis(duration) * 1000
}

fn mysql_error_number(error: &sqlx::Error) -> Option<u16> {
    let database = error.as_database_error()?;
    Some(database.try_downcast_ref::<MySqlDatabaseError>()?.number())
}

#[async_trait]
impl LockProvider for MySqlLockProvider {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        let name = config.name();
        // INSERT IGNORE would silently truncate a longer name.
        check_lock_name(name)?;
        let fail = |e| store_error(Operation::Acquire, name, &self.table, e);
        let lease = micros(config.lock_at_most_for());
        // All statements of the attempt on one connection.
        let mut connection = self.connections.get(&self.pool).await.map_err(fail)?;
        let window = micros(config.acquired_within_window());
        let updated = sqlx::query(self.sql.acquire.clone())
            .bind(window)
            .bind(&*self.holder)
            .bind(window)
            .bind(window)
            .bind(lease)
            .bind(window)
            .bind(lease)
            .bind(name)
            .execute(connection.connection())
            .await;
        connection.finish(&updated);
        let updated = updated.map_err(fail)?;
        let token = if updated.rows_affected() == 0 {
            // No row yet (or deleted by hand): create it.
            let inserted = sqlx::query(self.sql.insert.clone())
                .bind(name)
                .bind(lease)
                .bind(&*self.holder)
                .execute(connection.connection())
                .await;
            connection.finish(&inserted);
            let inserted = inserted.map_err(fail)?;
            if inserted.rows_affected() == 0 {
                return Ok(None); // another instance created it first
            }
            1
        } else {
            match i64::try_from(updated.last_insert_id()) {
                Ok(0) => return Ok(None), // held: the IF() left the row alone
                Ok(token) => token,
                Err(_) => {
                    return Err(Error::store(
                        Operation::Acquire,
                        name,
                        format!("fencing token {} out of range", updated.last_insert_id()),
                    ));
                }
            }
        };
        let Some((locked_at, lock_until)) = self
            .lease_times(&mut connection, Operation::Acquire, name, token)
            .await?
        else {
            if token == 1 {
                // The row just inserted is not there under its name: the column truncated it.
                return Err(Error::store(
                    Operation::Acquire,
                    name,
                    format!(
                        "the row inserted for lock {name:?} cannot be found by that name; \
                         is the name column of `{}` shorter than the name?",
                        self.table.name
                    ),
                ));
            }
            tracing::debug!(
                lock = name,
                token,
                "lease expired and was taken over before its times were read"
            );
            return Ok(None);
        };
        Ok(Some(LockLease::new(
            config,
            Arc::clone(&self.holder),
            token.unsigned_abs(),
            system_time(locked_at),
            system_time(lock_until),
        )))
    }

    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        let Some(token) = token_param(lease.fencing_token()) else {
            return Ok(false);
        };
        let fail = |e| store_error(Operation::Release, lease.name(), &self.table, e);
        let mut connection = self.connections.get(&self.pool).await.map_err(fail)?;
        let released = sqlx::query(self.sql.release.clone())
            .bind(micros(lease.lock_at_least_for()))
            .bind(lease.name())
            .bind(&*self.holder)
            .bind(token)
            .execute(connection.connection())
            .await;
        connection.finish(&released);
        Ok(released.map_err(fail)?.rows_affected() == 1)
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
        let fail = |e| store_error(Operation::Extend, lease.name(), &self.table, e);
        let mut connection = self.connections.get(&self.pool).await.map_err(fail)?;
        let extended = sqlx::query(self.sql.extend.clone())
            .bind(micros(lock_at_most_for))
            .bind(lease.name())
            .bind(&*self.holder)
            .bind(token)
            .execute(connection.connection())
            .await;
        connection.finish(&extended);
        if extended.map_err(fail)?.rows_affected() == 0 {
            return Ok(None);
        }
        let times = self
            .lease_times(&mut connection, Operation::Extend, lease.name(), token)
            .await?;
        Ok(times.map(|(_, until)| {
            lease.extended(system_time(until), lock_at_most_for, lock_at_least_for)
        }))
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
        let file = include_str!("../../sql/mysql.sql");
        assert!(
            file.contains(&generated),
            "sql/mysql.sql differs from:\n{generated}"
        );
    }
}
