//! The SQL lock provider, written once over a [`Dialect`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use shedlock_core::{
    Error, LockConfiguration, LockInspector, LockLease, LockProvider, Operation, RunLog,
    async_trait,
};
use sqlx::{Pool, Transaction};
use tokio::sync::broadcast;

mod batch;
mod claims;
pub(crate) mod combine;
mod dedicated;
pub(crate) mod retry;

pub(crate) use dedicated::DedicatedConnections;

use crate::board::BoardDriver;
use crate::dialect::{RunDialect, RunStatements, Statements};
use crate::runs::RunTable;
use crate::schema_check::schema_issues;
use crate::{
    Acquire, Acquired, Dialect, Lease, SchemaIssue, SqlLockProviderBuilder, Table, store_error,
    system_time, token_from_db, token_param, validate_holder,
};
use batch::{AcquireQueue, Answer};
use claims::Claims;
use combine::{Combiner, Keyed};
use retry::{Retry, run};

/// Locks in a table of a SQL database, on the database's clock, with fencing tokens: the one
/// provider behind [`PgLockProvider`](crate::PgLockProvider),
/// [`MySqlLockProvider`](crate::MySqlLockProvider) and
/// [`SqliteLockProvider`](crate::SqliteLockProvider), whose pages say what differs per
/// database.
///
/// - **Fast by default.** [`connect`](Self::connect) opens a pool set up for lock statements,
///   and the provider runs acquire, release and extend on
///   [connections of its own](SqlLockProviderBuilder::dedicated_connections) (by default up to 32
///   on a server, 4 on an SQLite file, opened as concurrent statements need them and closed
///   after a minute idle), one round trip per statement. Given a pool of yours
///   ([`new`](Self::new), [`builder`](Self::builder)), it does the same, opening those
///   connections through your pool (they count in addition to its `max_connections`).
/// - **Batches cost a fixed number of statements.**
///   [`acquire_many`](LockProvider::acquire_many) (the scheduler's one claim per instant)
///   sorts the locks by name, so that two instances' batches take their rows in one order
///   and never deadlock, and sends them in chunks of up to 1,000, each with every lock's own
///   conditions (lease, window, tick); the answers come in the order asked. PostgreSQL: one
///   statement per chunk. MySQL/MariaDB: four statements in one transaction (see
///   [`MySqlLockProvider`](crate::MySqlLockProvider)). SQLite: one statement per chunk
///   (see [`SqliteLockProvider`](crate::SqliteLockProvider)). When a chunk's statements fail,
///   each of its locks gets its own [`Error::Store`] (a lease granted by a statement whose
///   answer was lost is recognised and kept, as for a single acquire).
/// - **Acquisitions are batched under load.** While one of the provider's connections is
///   free, an acquire is one statement of its own. When all are busy (many jobs firing on
///   the same instant), acquires queue, and the next connection to become free sends every
///   queued one (up to 1,000, one per lock name) as one batch as above; each caller gets its
///   own answer. A caller that goes away while queued is left out; one that goes away after
///   its lock was won gets it released. A provider with
///   [`dedicated_connections(0)`](SqlLockProviderBuilder::dedicated_connections) never queues.
/// - **Serialization failures are retried.** A statement the database aborted with SQLSTATE
///   `40001` or `40P01` (a `SERIALIZABLE` database such as CockroachDB, or a deadlock) rolled
///   back, so it is retried up to 5 more times after a random pause of up to 2, 4, …, 32 ms.
///   An acquire still conflicting after that answers "not acquired" (another instance is
///   writing that lock); a release or extend reports [`Error::Store`].
/// - Clones share the pool, the connections and the prepared SQL;
///   [`with_holder`](Self::with_holder) makes another instance on the same table.
pub struct SqlLockProvider<D: Dialect> {
    pub(crate) pool: Pool<D::Database>,
    pub(super) connections: Arc<DedicatedConnections<D::Database>>,
    pub(super) queue: Arc<AcquireQueue>,
    claims: Arc<Claims>,
    releases: Arc<Combiner<LockLease, Result<bool, Error>>>,
    pub(crate) run_writes: Arc<crate::runs::RunWrites>,
    pub(super) holder: Arc<str>,
    pub(crate) table: Arc<Table>,
    pub(crate) sql: Arc<Statements<D::OwnStatements>>,
    pub(crate) state: Arc<D::State>,
    pub(crate) run_table: Arc<RunTable>,
    pub(crate) run_sql: Arc<RunStatements<<D::Runs as RunDialect>::OwnStatements>>,
    /// The fleet's board: its table and statements (`crate::board`).
    pub(crate) board: Arc<crate::board::BoardTable<D::Database>>,
}

impl<D: Dialect> Clone for SqlLockProvider<D> {
    fn clone(&self) -> Self {
        SqlLockProvider {
            pool: self.pool.clone(),
            connections: Arc::clone(&self.connections),
            queue: Arc::clone(&self.queue),
            claims: Arc::clone(&self.claims),
            releases: Arc::clone(&self.releases),
            run_writes: Arc::clone(&self.run_writes),
            holder: Arc::clone(&self.holder),
            table: Arc::clone(&self.table),
            sql: Arc::clone(&self.sql),
            state: Arc::clone(&self.state),
            run_table: Arc::clone(&self.run_table),
            run_sql: Arc::clone(&self.run_sql),
            board: Arc::clone(&self.board),
        }
    }
}

impl Keyed for LockLease {
    type Key = (Arc<str>, u64);
    fn key(&self) -> (Arc<str>, u64) {
        (Arc::from(self.name()), self.fencing_token())
    }
}

impl<D: Dialect> std::fmt::Debug for SqlLockProvider<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlLockProvider")
            .field("dialect", &std::any::type_name::<D>())
            .field("table", &self.table.name)
            .field("holder", &self.holder)
            .field("connections", &self.connections)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

impl<D: Dialect> SqlLockProvider<D> {
    /// Opens a pool set up for lock statements and returns a default provider on it (table
    /// `shedlock`, connections of its own): the fast path. Each database's page says what the
    /// pool looks like; [`pool`](Self::pool) gives it to the rest of the service.
    ///
    /// # Errors
    /// The sqlx error when the URL is invalid or the database cannot be reached.
    pub async fn connect(url: &str) -> Result<Self, sqlx::Error> {
        Ok(Self::new(D::connect(url).await?))
    }

    /// A provider on table `shedlock` with ShedLock's column names, holding as
    /// [`default_holder()`](shedlock_core::default_holder).
    pub fn new(pool: Pool<D::Database>) -> Self {
        Self::builder(pool)
            .build()
            .expect("the default table, columns and holder are valid")
    }

    /// Configures table, columns, holder and connections; see [`SqlLockProviderBuilder`].
    pub fn builder(pool: Pool<D::Database>) -> SqlLockProviderBuilder<D> {
        SqlLockProviderBuilder::new(pool)
    }

    pub(crate) fn from_parts(
        pool: Pool<D::Database>,
        table: Table,
        run_table: RunTable,
        board_table: String,
        holder: Arc<str>,
        dedicated_connections: usize,
        state: D::State,
    ) -> Self {
        SqlLockProvider {
            pool,
            connections: Arc::new(DedicatedConnections::new(dedicated_connections)),
            queue: Arc::default(),
            claims: Arc::default(),
            releases: Arc::default(),
            run_writes: Arc::default(),
            holder,
            sql: Arc::new(D::statements(&table)),
            table: Arc::new(table),
            state: Arc::new(state),
            run_sql: Arc::new(<D::Runs as RunDialect>::statements(&run_table)),
            run_table: Arc::new(run_table),
            board: Arc::new(crate::board::BoardTable::new(board_table)),
        }
    }

    pub(crate) fn table_ref(&self) -> &Table {
        &self.table
    }

    /// The same store acting as another holder (another instance), sharing the pool, the
    /// connections and the prepared SQL.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`holder`) when empty, longer than 255 characters or holding
    /// control characters.
    pub fn with_holder(&self, holder: impl Into<String>) -> Result<Self, Error> {
        Ok(SqlLockProvider {
            holder: validate_holder(holder.into())?,
            // Batches are sent, and acquisitions told apart, per holder.
            queue: Arc::default(),
            claims: Arc::default(),
            releases: Arc::default(),
            run_writes: Arc::default(),
            ..self.clone()
        })
    }

    /// The pool this provider runs on: for schema, inspection, the fencing guard's
    /// transactions and the rest of the service.
    pub fn pool(&self) -> &Pool<D::Database> {
        &self.pool
    }

    /// The lock table, as configured (`table` or `schema.table`).
    pub fn table(&self) -> &str {
        &self.table.name
    }

    /// Creates the lock table if it does not exist, and adds the `fencing_token` column to a
    /// table created by ShedLock; creates the run table ([`runs_table`](Self::runs_table)) and
    /// the fleet's board table ([`board_table`](Self::board_table)) if they do not exist.
    /// Idempotent, and safe to run from several instances at once.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Schema`) when the database refuses, e.g. for lack of rights.
    pub async fn create_schema(&self) -> Result<(), Error> {
        D::create_schema(&self.pool, &self.table)
            .await
            .map_err(|e| store_error(Operation::Schema, &self.table.name, &self.table, e))?;
        <D::Runs as RunDialect>::create(&self.pool, &self.run_table)
            .await
            .map_err(|e| store_error(Operation::Schema, &self.run_table.name, &self.table, e))?;
        let board = self.board_table();
        <D::Database as BoardDriver>::create_board(&self.pool, board)
            .await
            .map_err(|e| store_error(Operation::Schema, board, &self.table, e))
    }

    /// The run table, as configured (`<table>_runs` by default).
    pub fn runs_table(&self) -> &str {
        &self.run_table.name
    }

    /// The `CREATE TABLE IF NOT EXISTS` statement [`create_schema`](Self::create_schema) runs
    /// for this provider's table and columns (the `sql/` file of its database, for the default
    /// names): for migration tools, or a command line's `schema` command.
    pub fn schema_sql(&self) -> String {
        format!(
            "{}\n\n{}\n\n{}",
            self.table.create_table_sql(&D::COLUMN_TYPES),
            <D::Runs as RunDialect>::create_sql(&self.run_table),
            <D::Database as BoardDriver>::board_create_sql(self.board_table())
        )
    }

    /// Reads the table's columns and keys from the database's catalog and says what keeps
    /// this provider from working on it safely: a missing table, a missing column, a column
    /// whose type cannot hold what the statements write (e.g. PostgreSQL `timestamptz`, MySQL
    /// `TIMESTAMP`), or a name column that is not the primary key. Empty when the table fits;
    /// [`schema_sql`](Self::schema_sql) is a table that does.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Schema`) when the catalog cannot be read.
    pub async fn check_schema(&self) -> Result<Vec<SchemaIssue>, Error> {
        let columns = D::table_columns(&self.pool, &self.table)
            .await
            .map_err(|e| store_error(Operation::Schema, "*", &self.table, e))?;
        let mut issues = schema_issues::<D>(&self.table, &columns);
        let runs = Table {
            name: self.run_table.name.clone(),
            columns: self.table.columns.clone(),
        };
        let run_columns = D::table_columns(&self.pool, &runs)
            .await
            .map_err(|e| store_error(Operation::Schema, "*", &self.table, e))?;
        if run_columns.is_empty() {
            issues.push(SchemaIssue::MissingTable { table: runs.name });
        }
        Ok(issues)
    }

    /// Runs the acquire and release statements on the probe lock `shedlock-access-probe`
    /// inside a transaction that is then rolled back: whether this database user may do what
    /// the provider does (read, insert and update the table), without leaving a trace.
    ///
    /// # Errors
    /// [`Error::Store`] naming the statement (`Operation::Acquire` or `Operation::Release`)
    /// that the database refused, e.g. for lack of privileges.
    pub async fn check_access(&self) -> Result<(), Error> {
        const PROBE: &str = "shedlock-access-probe";
        let config = LockConfiguration::new(PROBE, Duration::from_secs(1), Duration::ZERO)?;
        let fail = |operation| move |e| store_error(operation, PROBE, &self.table, e);
        let mut tx = self.pool.begin().await.map_err(fail(Operation::Acquire))?;
        let args = Acquire {
            holder: &self.holder,
            config: &config,
        };
        let acquired = D::acquire(&mut *tx, &self.sql, args)
            .await
            .map_err(fail(Operation::Acquire))?;
        if let Some(acquired) = acquired {
            let lease = Lease {
                name: PROBE,
                holder: &self.holder,
                token: acquired.token,
                duration: Duration::ZERO,
            };
            D::release(&mut *tx, &self.sql, &self.state, lease)
                .await
                .map_err(fail(Operation::Release))?;
        }
        tx.rollback().await.map_err(fail(Operation::Release))
    }

    /// The fencing guard for writes to this same database: inside the caller's transaction,
    /// checks that the lease `(lock_name, fencing_token)` of this provider's holder is still the
    /// live one (database clock) and locks its row until the transaction ends.
    ///
    /// Holder and token are both checked: a row another program acquired without writing a
    /// token (Java ShedLock on a shared table) keeps the last token, and only its holder tells
    /// the leases apart.
    ///
    /// While the row is locked nobody can take the lock over, so the caller's writes commit
    /// before any later holder's; a holder that was paused past its lease gets
    /// [`Error::LockLost`] here and should roll back. Takeover, release and extension of this
    /// lock wait for the transaction, so keep it short. PostgreSQL locks the row `FOR SHARE`,
    /// MySQL `LOCK IN SHARE MODE`; SQLite takes its database-wide write lock (start the
    /// transaction with `pool.begin_with("BEGIN IMMEDIATE")`, or a deferred transaction that
    /// already read may fail here with `SQLITE_BUSY`).
    ///
    /// ```no_run
    /// # use shedlock_sqlx::PgLockProvider;
    /// # async fn job(provider: &PgLockProvider, lock: &shedlock_runtime::LockContext) -> Result<(), Box<dyn std::error::Error>> {
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
    /// [`Error::Store`] (`Operation::Read`) when the statement fails (e.g. a serialization
    /// failure, which aborts the caller's transaction: retry the transaction).
    pub async fn verify_lease(
        &self,
        tx: &mut Transaction<'_, D::Database>,
        lock_name: &str,
        fencing_token: u64,
    ) -> Result<(), Error> {
        let live = match token_param(fencing_token) {
            Some(token) => D::verify(&mut **tx, &self.sql, lock_name, &self.holder, token)
                .await
                .map_err(|e| store_error(Operation::Read, lock_name, &self.table, e))?,
            None => false,
        };
        if live {
            Ok(())
        } else {
            Err(Error::LockLost {
                lock_name: lock_name.to_owned(),
            })
        }
    }
}

#[async_trait]
impl<D: Dialect> LockProvider for SqlLockProvider<D> {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        let name = config.name();
        if self.should_queue()
            && let Answer::Done(outcome) = self.acquire_queued(config).await
        {
            return outcome;
        }
        let args = Acquire {
            holder: &self.holder,
            config,
        };
        let sql = &*self.sql;
        let in_flight = self.claims.begin(name);
        let started = Instant::now();
        let mut reconnected = false;
        let acquired = match run!(self, reconnected = reconnected, |c| D::acquire(
            c, sql, args
        )) {
            // Ran again on a new connection after the first broke: the first may have been
            // granted, and this one then finds the lock held.
            Ok(None)
                if reconnected
                    && in_flight.alone()
                    && let Some(lease) = self.adopt_lost_grant(config, started).await =>
            {
                return Ok(Some(lease));
            }
            Ok(acquired) => acquired,
            Err(Some(e)) if !D::is_busy(&e) => {
                if answer_may_be_lost(&e)
                    && in_flight.alone()
                    && let Some(lease) = self.adopt_lost_grant(config, started).await
                {
                    return Ok(Some(lease));
                }
                return Err(store_error(Operation::Acquire, name, &self.table, e));
            }
            Err(e) => {
                let error = e.map(|e| e.to_string());
                tracing::debug!(
                    lock = name,
                    ?error,
                    "database busy: lock not acquired this time"
                );
                return Ok(None);
            }
        };
        acquired
            .map(|acquired| self.lease(config, acquired))
            .transpose()
    }

    /// One call of the dialect's batch statement per chunk of up to
    /// [`MAX_ACQUIRE_BATCH`](Dialect::MAX_ACQUIRE_BATCH) locks, sorted by name (see
    /// [`SqlLockProvider`]); one acquire per lock, all at once, where the dialect has none.
    async fn acquire_many(
        &self,
        configs: &[LockConfiguration],
    ) -> Vec<Result<Option<LockLease>, Error>> {
        match configs {
            [] => Vec::new(),
            [config] => vec![self.acquire(config).await],
            _ if D::MAX_ACQUIRE_BATCH > 1 => self.acquire_sorted(configs).await,
            _ => futures_util::future::join_all(configs.iter().map(|c| self.acquire(c))).await,
        }
    }

    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        if token_param(lease.fencing_token()).is_none() {
            return Ok(false);
        }
        if D::MAX_RELEASE_BATCH > 1 {
            let provider = self.clone();
            let send = move |leases: Vec<LockLease>| {
                let provider = provider.clone();
                async move { provider.release_together(leases).await }
            };
            let released = self
                .releases
                .submit(lease.clone(), D::MAX_RELEASE_BATCH, send)
                .await;
            if let Some(released) = released {
                return released;
            }
        }
        self.release_alone(lease).await
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
        let args = Lease {
            name: lease.name(),
            holder: &self.holder,
            token,
            duration: lock_at_most_for,
        };
        let sql = &*self.sql;
        let lock_until = run!(self, |c| D::extend(c, sql, args))
            .map_err(|e| self.operation_error(Operation::Extend, lease.name(), e))?;
        Ok(lock_until
            .map(|until| lease.extended(system_time(until), lock_at_most_for, lock_at_least_for)))
    }

    fn holder(&self) -> &str {
        &self.holder
    }

    fn release_hints(&self) -> Option<broadcast::Receiver<Arc<str>>> {
        D::release_hints(&self.pool, &self.state)
    }

    fn run_log(&self) -> Option<&dyn RunLog> {
        Some(self)
    }

    fn inspector(&self) -> Option<&dyn LockInspector> {
        Some(self)
    }

    fn board(&self) -> Option<&dyn shedlock_core::Board> {
        Some(self)
    }
}

impl<D: Dialect> SqlLockProvider<D> {
    /// A release in a statement of its own.
    async fn release_alone(&self, lease: &LockLease) -> Result<bool, Error> {
        let Some(token) = token_param(lease.fencing_token()) else {
            return Ok(false);
        };
        let args = Lease {
            name: lease.name(),
            holder: &self.holder,
            token,
            duration: lease.lock_at_least_for(),
        };
        let (sql, state) = (&*self.sql, &*self.state);
        run!(self, |c| D::release(c, sql, state, args))
            .map_err(|e| self.operation_error(Operation::Release, lease.name(), e))
    }

    /// The releases that came together (distinct leases, see [`combine`]): one alone, more in
    /// one statement. `None` when that statement failed: each goes alone, for its own error.
    async fn release_together(&self, leases: Vec<LockLease>) -> Option<Vec<Result<bool, Error>>> {
        if let [lease] = leases.as_slice() {
            return Some(vec![self.release_alone(lease).await]);
        }
        // Sorted by name: the statement locks the rows in that order (and a name is released
        // at most once: two leases of one name are two tokens, of which one is not live).
        let mut order: Vec<usize> = (0..leases.len()).collect();
        order.sort_unstable_by_key(|&i| leases[i].name());
        order.dedup_by_key(|i| leases[*i].name());
        if order.len() < leases.len() {
            return None;
        }
        let args: Vec<Lease<'_>> = order
            .iter()
            .filter_map(|&i| {
                let lease = &leases[i];
                Some(Lease {
                    name: lease.name(),
                    holder: &self.holder,
                    token: token_param(lease.fencing_token())?,
                    duration: lease.lock_at_least_for(),
                })
            })
            .collect();
        let (sql, state, args) = (&*self.sql, &*self.state, args.as_slice());
        match run!(self, |c| D::release_batch(c, sql, state, args)) {
            Ok(Some(released)) => {
                let released: std::collections::HashSet<String> = released.into_iter().collect();
                Some(
                    leases
                        .iter()
                        .map(|lease| Ok(released.contains(lease.name())))
                        .collect(),
                )
            }
            Ok(None) => None,
            Err(error) => {
                let error = error.map(|e| e.to_string());
                tracing::debug!(
                    ?error,
                    leases = leases.len(),
                    "batched release failed; releasing one by one"
                );
                None
            }
        }
    }

    /// After an acquire whose answer was lost, the lease the database granted it, if any: the
    /// row is held by this holder and was taken after the call began, and no other acquisition
    /// of the name in this process overlapped the call (the caller checks), so nobody else can
    /// have written it. Without this, the lock stayed taken for `lock_at_most_for` by a lease
    /// nobody knew of.
    async fn adopt_lost_grant(
        &self,
        config: &LockConfiguration,
        started: Instant,
    ) -> Option<LockLease> {
        let record = self.lock_record(config.name()).await.ok()??;
        if record.holder != *self.holder || !record.held {
            return None;
        }
        // The database's clock when the call began, less what clock rates and rounding can
        // move it by (as for a lease's local deadline).
        let elapsed = started.elapsed();
        let began = record
            .read_at
            .checked_sub(elapsed + elapsed / 100 + Duration::from_millis(2))?;
        if record.locked_at < began {
            return None;
        }
        tracing::warn!(
            lock = config.name(),
            token = record.fencing_token,
            "the answer to an acquire was lost; the lease it was granted is adopted"
        );
        Some(LockLease::new(
            config,
            Arc::clone(&self.holder),
            record.fencing_token,
            record.locked_at,
            record.lock_until,
        ))
    }

    /// The lease an acquisition of `config` wrote.
    pub(super) fn lease(
        &self,
        config: &LockConfiguration,
        acquired: Acquired,
    ) -> Result<LockLease, Error> {
        let token = token_from_db(acquired.token)
            .map_err(|e| Error::store(Operation::Acquire, config.name(), e))?;
        Ok(LockLease::new(
            config,
            Arc::clone(&self.holder),
            token,
            system_time(acquired.locked_at),
            system_time(acquired.lock_until),
        ))
    }

    pub(crate) fn operation_error(
        &self,
        operation: Operation,
        name: &str,
        error: Option<sqlx::Error>,
    ) -> Error {
        match error {
            Some(e) => store_error(operation, name, &self.table, e),
            None => Error::store(
                operation,
                name,
                format!(
                    "serialization failures persisted after {} attempts",
                    Retry::ATTEMPTS
                ),
            ),
        }
    }
}

/// Whether a failed statement may have been carried out by the database although its answer
/// never came: the connection broke (or the answer could not be read) after it was sent.
/// A database's own error, a pool that gave no connection, a refused connection (nothing was
/// sent) or a decoding error mean it was not.
fn answer_may_be_lost(error: &sqlx::Error) -> bool {
    matches!(
        error,
        sqlx::Error::Io(e) if e.kind() != std::io::ErrorKind::ConnectionRefused
    ) || matches!(
        error,
        sqlx::Error::Protocol(_) | sqlx::Error::Tls(_) | sqlx::Error::WorkerCrashed
    )
}
