//! The PostgreSQL provider.

mod hints;
mod statements;

use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDateTime;
use shedlock_core::{Error, LockConfiguration, LockLease, LockProvider, Operation, async_trait};
use sqlx::{PgPool, Postgres, Transaction};
use tokio::sync::broadcast;

use crate::common::{
    DedicatedConnections, LockProviderBuilder, MAX_IDENTIFIER_LEN, Table, check_lock_name,
    lease_millis, lease_verdict, shared_api, store_error, system_time, token_from_db, token_param,
};
pub(crate) use hints::ReleaseNotify;
use hints::{NotifyPolicy, ReleaseHints};
use statements::Statements;

/// Serialises concurrent `create_schema` calls across instances (an advisory lock key).
const SCHEMA_LOCK_KEY: i64 = 0x5348_4544_4c4f_434b; // "SHEDLOCK"

/// Locks in a PostgreSQL table, on the database's clock, with fencing tokens.
///
/// Each operation is one autocommit statement, one round trip: acquire is an
/// `INSERT … ON CONFLICT DO UPDATE … WHERE lock_until <= now RETURNING …`, release and extend are
/// `UPDATE`s matching name, holder **and** fencing token. Times are `TIMESTAMP` in UTC from
/// `clock_timestamp()`, so neither instance clocks nor session time zones matter.
///
/// For fast handover (leader election), a release can also send `NOTIFY` on the
/// [release channel](Self::release_channel) (default `<table>_released`, lower-cased, `.` as
/// `_`; payload: the lock name) from the same statement, so that waiting instances retry at once
/// instead of at their next poll; [`LockProvider::release_hints`] listens for them. PostgreSQL
/// serialises the commits of all notifying transactions (8 workers doing acquire+release pairs
/// ran about 4 times slower with a `NOTIFY` on every release), so by default a provider only
/// notifies once it (or a clone) listens for hints itself, which every election candidate
/// does. [`notify_every_release`](LockProviderBuilder::notify_every_release) and
/// [`without_release_notify`](LockProviderBuilder::without_release_notify) change that.
/// Notifications are hints: they are lost while a listener reconnects, so keep polling too.
///
/// Clones share the pool and the prepared SQL.
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_core::{LockConfiguration, LockProvider};
/// use shedlock_sqlx::PgLockProvider;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let pool = sqlx::PgPool::connect("postgres://localhost/app").await?;
/// let provider = PgLockProvider::builder(pool).table("shedlock").build()?;
/// provider.create_schema().await?;
/// let config = LockConfiguration::new("nightly_report", Duration::from_secs(600), Duration::ZERO)?;
/// if let Some(lease) = provider.acquire(&config).await? {
///     println!("running with fencing token {}", lease.fencing_token());
///     provider.release(&lease).await?;
/// }
/// # Ok(())
/// # }
/// ```
///
/// sqlx's pool pings a connection on every return and, by default, on every checkout: a pool
/// used only for locks saves one of those round trips per statement with
/// `PgPoolOptions::new().test_before_acquire(false)`, and
/// [`dedicated_connections`](LockProviderBuilder::dedicated_connections) saves both.
#[derive(Debug, Clone)]
pub struct PgLockProvider {
    pool: PgPool,
    connections: Arc<DedicatedConnections<Postgres>>,
    holder: Arc<str>,
    table: Arc<Table>,
    channel: Option<Arc<str>>,
    notify_always: bool,
    hints: Arc<ReleaseHints>,
    sql: Arc<Statements>,
}

shared_api!(PgLockProvider, PgPool);

impl PgLockProvider {
    /// The channel releases notify (payload: the lock name), unless built
    /// [`without_release_notify`](LockProviderBuilder::without_release_notify). `LISTEN` on it,
    /// e.g. with `sqlx::postgres::PgListener::listen`, to learn at once that a lock became free
    /// (see the type's docs for when releases notify).
    pub fn release_channel(&self) -> Option<&str> {
        self.channel.as_deref()
    }

    /// Creates the lock table if it does not exist, and adds the `fencing_token` column to a
    /// table created by ShedLock. Idempotent, and safe to run from several instances at once
    /// (serialised by an advisory lock).
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Schema`) when the database refuses, e.g. for lack of rights.
    pub async fn create_schema(&self) -> Result<(), Error> {
        let fail = |e| store_error(Operation::Schema, &self.table.name, &self.table, e);
        let mut tx = self.pool.begin().await.map_err(fail)?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(SCHEMA_LOCK_KEY)
            .execute(&mut *tx)
            .await
            .map_err(fail)?;
        sqlx::query(self.sql.create_table.clone())
            .execute(&mut *tx)
            .await
            .map_err(fail)?;
        // Checked first because ALTER TABLE takes an exclusive lock even when it changes nothing.
        let has_token: bool = sqlx::query_scalar(self.sql.has_token_column.clone())
            .bind(&self.table.name)
            .bind(&self.table.columns.fencing_token)
            .fetch_one(&mut *tx)
            .await
            .map_err(fail)?;
        if !has_token {
            sqlx::query(self.sql.add_token_column.clone())
                .execute(&mut *tx)
                .await
                .map_err(fail)?;
        }
        tx.commit().await.map_err(fail)
    }

    /// The fencing guard for writes to this same database: inside the caller's transaction,
    /// checks that the lease `(lock_name, fencing_token)` is still the live one (database clock)
    /// and locks its row (`FOR SHARE`) until the transaction ends.
    ///
    /// While the row is locked nobody can take the lock over, so the caller's writes commit
    /// before any later holder's; a holder that was paused past its lease gets
    /// [`Error::LockLost`] here and should roll back. Takeover, release and extension of this
    /// lock wait for the transaction, so keep it short.
    ///
    /// ```no_run
    /// # use shedlock_sqlx::PgLockProvider;
    /// # async fn job(provider: &PgLockProvider, lock: &shedlock_core::LockContext) -> Result<(), Box<dyn std::error::Error>> {
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
    /// [`Error::Store`] (`Operation::Read`) when the query fails (e.g. a serialization failure
    /// under `REPEATABLE READ`).
    pub async fn verify_lease(
        &self,
        tx: &mut Transaction<'_, Postgres>,
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
}

impl LockProviderBuilder<PgPool> {
    /// The channel releases notify, instead of `<table>_released` (at most 63 bytes,
    /// PostgreSQL's limit).
    pub fn release_channel(mut self, channel: impl Into<String>) -> Self {
        self.release_notify.channel = Some(channel.into());
        self
    }

    /// Notify on every successful release, not only once this provider listens for hints:
    /// for instances that `LISTEN` on the channel themselves.
    pub fn notify_every_release(mut self) -> Self {
        self.release_notify.policy = NotifyPolicy::Always;
        self
    }

    /// Never notify, and offer no release hints.
    pub fn without_release_notify(mut self) -> Self {
        self.release_notify.policy = NotifyPolicy::Never;
        self
    }

    /// Runs the lock statements (acquire, release, extend) on up to `connections` connections
    /// that the provider and its clones keep open, instead of checking a connection out of the
    /// pool for each statement; default 0 (always the pool).
    ///
    /// sqlx pings a connection on every return to the pool (and, with its default
    /// `test_before_acquire(true)`, on every checkout): a kept connection needs neither ping,
    /// so each statement is one round trip. That matters under load, e.g. many jobs, or one
    /// provider shared by a busy service: see `BENCHMARKS.md` for the measured effect.
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
    /// [`Error::InvalidConfig`] naming the field: `table`, `columns.*`, `holder` or
    /// `release_channel`.
    pub fn build(self) -> Result<PgLockProvider, Error> {
        let notify = self.release_notify.clone();
        let dedicated = self.dedicated_connections;
        let (pool, table, holder) = self.validate()?;
        let channel = match (notify.policy, notify.channel) {
            (NotifyPolicy::Never, _) => None,
            (_, Some(channel)) => Some(channel),
            (_, None) => Some(table.name.replace('.', "_").to_lowercase() + "_released"),
        };
        if let Some(channel) = &channel
            && (channel.is_empty() || channel.len() > MAX_IDENTIFIER_LEN || channel.contains('\0'))
        {
            return Err(Error::invalid_config(
                "release_channel",
                format!(
                    "{channel:?} is not a usable channel name (1 to {MAX_IDENTIFIER_LEN} bytes); \
                     set one with `release_channel` or use `without_release_notify`"
                ),
            ));
        }
        let sql = Statements::new(&table);
        Ok(PgLockProvider {
            pool,
            connections: Arc::new(DedicatedConnections::new(dedicated)),
            holder,
            table: Arc::new(table),
            channel: channel.map(Arc::from),
            notify_always: notify.policy == NotifyPolicy::Always,
            hints: Arc::default(),
            sql: Arc::new(sql),
        })
    }
}

/// A duration as an `INTERVAL` parameter, in whole milliseconds like the other dialects.
fn interval(duration: Duration) -> Duration {
    Duration::from_millis(lease_millis(duration).unsigned_abs())
}

#[async_trait]
impl LockProvider for PgLockProvider {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        let name = config.name();
        check_lock_name(name)?;
        let fail = |e| store_error(Operation::Acquire, name, &self.table, e);
        let mut connection = self.connections.get(&self.pool).await.map_err(fail)?;
        let row = sqlx::query_as(self.sql.acquire.clone())
            .bind(name)
            .bind(&*self.holder)
            .bind(interval(config.lock_at_most_for()))
            .bind(interval(config.acquired_within_window()))
            .fetch_optional(connection.connection())
            .await;
        connection.finish(&row);
        let row: Option<(i64, NaiveDateTime, NaiveDateTime)> = row.map_err(fail)?;
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
        // NOTIFY serialises the commits of all notifying transactions in the database, so it
        // is sent only where it can help: once someone in this process listens (an election).
        let notify = self
            .channel
            .as_deref()
            .filter(|_| self.notify_always || self.hints.started());
        let sql = match notify {
            Some(_) => &self.sql.release_notify,
            None => &self.sql.release,
        };
        let mut query = sqlx::query(sql.clone())
            .bind(lease.name())
            .bind(&*self.holder)
            .bind(token)
            .bind(interval(lease.lock_at_least_for()));
        if let Some(channel) = notify {
            query = query.bind(channel);
        }
        let fail = |e| store_error(Operation::Release, lease.name(), &self.table, e);
        let mut connection = self.connections.get(&self.pool).await.map_err(fail)?;
        let released = query.fetch_optional(connection.connection()).await;
        connection.finish(&released);
        Ok(released.map_err(fail)?.is_some())
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
        let lock_until = sqlx::query_scalar(self.sql.extend.clone())
            .bind(lease.name())
            .bind(&*self.holder)
            .bind(token)
            .bind(interval(lock_at_most_for))
            .fetch_optional(connection.connection())
            .await;
        connection.finish(&lock_until);
        let lock_until: Option<NaiveDateTime> = lock_until.map_err(fail)?;
        Ok(lock_until
            .map(|until| lease.extended(system_time(until), lock_at_most_for, lock_at_least_for)))
    }

    fn holder(&self) -> &str {
        &self.holder
    }

    /// Names of released locks, from `LISTEN` on the [release channel](Self::release_channel).
    /// The first call starts a listener task that holds one connection of the pool until the
    /// provider and all its clones are dropped, and from then on their releases notify.
    /// `None` without a channel or outside a tokio runtime.
    fn release_hints(&self) -> Option<broadcast::Receiver<Arc<str>>> {
        self.hints.subscribe(&self.pool, self.channel.as_ref()?)
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
        let file = include_str!("../../sql/postgres.sql");
        assert!(
            file.contains(&generated),
            "sql/postgres.sql differs from:\n{generated}"
        );
    }
}
