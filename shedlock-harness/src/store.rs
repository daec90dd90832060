//! The three databases and Redis behind one type: the lock provider, and the harness's own journal
//! table, written inside the job's transaction behind the provider's fencing guard
//! (`verify_lease`); Redis and RedLock keep theirs in `redis_store`.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use shedlock::{
    Error, LockInspector, LockProvider, LockQuery, LockRecord, MySqlLockProvider, PgLockProvider,
    SqliteLockProvider,
};
use sqlx::mysql::MySqlPoolOptions;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{AssertSqlSafe, SqlStr};

use crate::event::WriteOutcome;
use crate::redis_store::RedisStore;

/// How long a statement waits for a pooled connection before failing, unless configured: a
/// database that does not answer becomes an error within this, never a silent hang. (sqlx's own
/// default is 30 s, during which a refused connection is retried without a log line.)
pub const DEFAULT_ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// Which database a run uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Backend {
    /// A file shared by the processes (WAL journal, busy timeout).
    Sqlite,
    /// PostgreSQL.
    Postgres,
    /// MySQL or MariaDB.
    MySql,
    /// One Redis server.
    Redis,
    /// RedLock over independent Redis masters.
    RedLock,
    /// An etcd cluster (the journal on the Redis test server, guarded by the lock's state in
    /// etcd and the resource's token rule).
    Etcd,
}

impl Backend {
    /// All three, in the order the figures list them.
    pub const ALL: [Backend; 3] = [Backend::Sqlite, Backend::Postgres, Backend::MySql];

    /// The environment variable holding the test server's URL (none for SQLite).
    pub fn url_var(self) -> Option<&'static str> {
        match self {
            Backend::Sqlite => None,
            Backend::Postgres => Some("SHEDLOCK_TEST_PG_URL"),
            Backend::MySql => Some("SHEDLOCK_TEST_MYSQL_URL"),
            Backend::Redis => Some("SHEDLOCK_TEST_REDIS_URL"),
            Backend::RedLock => Some("SHEDLOCK_TEST_REDLOCK_URLS"),
            Backend::Etcd => Some("SHEDLOCK_TEST_ETCD_URL"),
        }
    }

    /// An example URL for messages.
    pub fn example_url(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite:///tmp/shedlock-harness.db",
            Backend::Postgres => "postgres://root@127.0.0.1:5432/test",
            Backend::MySql => "mysql://root@127.0.0.1:3306/test",
            Backend::Redis => "redis://127.0.0.1:6379",
            Backend::RedLock => {
                "redis://127.0.0.1:6380,redis://127.0.0.1:6381,redis://127.0.0.1:6382"
            }
            Backend::Etcd => "http://127.0.0.1:2379,http://127.0.0.1:22379,http://127.0.0.1:32379",
        }
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
            Backend::MySql => "mysql",
            Backend::Redis => "redis",
            Backend::RedLock => "redlock",
            Backend::Etcd => "etcd",
        })
    }
}

impl FromStr for Backend {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s {
            "sqlite" => Ok(Backend::Sqlite),
            "postgres" | "pg" | "postgresql" => Ok(Backend::Postgres),
            "mysql" | "mariadb" => Ok(Backend::MySql),
            "redis" => Ok(Backend::Redis),
            "redlock" => Ok(Backend::RedLock),
            "etcd" => Ok(Backend::Etcd),
            other => anyhow::bail!(
                "unknown database {other:?}: expected sqlite, postgres, mysql, redis, redlock or etcd"
            ),
        }
    }
}

/// Where a run keeps its state: database, lock table and journal table.
#[derive(Debug, Clone)]
pub struct StoreConfig {
    /// The database kind.
    pub backend: Backend,
    /// Its URL (`sqlite:///path/file.db` for SQLite; for RedLock the journal's Redis, then the
    /// masters, comma-separated: [`redlock_url`](crate::redlock_url)).
    pub url: String,
    /// The lock table (unique per run).
    pub lock_table: String,
    /// The journal table (unique per run).
    pub journal_table: String,
    /// The lock holder this process acts as.
    pub holder: String,
    /// Pool size.
    pub max_connections: u32,
    /// How long a statement waits for a connection (connecting included) before failing.
    pub acquire_timeout: Duration,
}

/// One committed execution, as the journal table holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRow {
    /// Commit order (auto-increment id).
    pub id: i64,
    /// The lock.
    pub lock: String,
    /// The token the execution ran under.
    pub token: i64,
    /// Who ran it.
    pub holder: String,
    /// The tick it belongs to.
    pub tick: i64,
    /// Job body start (µs since the epoch).
    pub start: i64,
    /// Job body end, taken just before the guarded commit (µs since the epoch).
    pub end: i64,
}

/// A lock provider of one of the three kinds, with the journal it guards.
#[derive(Debug, Clone)]
pub enum Store {
    /// PostgreSQL.
    Postgres(PgLockProvider),
    /// MySQL or MariaDB.
    MySql(MySqlLockProvider),
    /// SQLite.
    Sqlite(SqliteLockProvider),
    /// Redis or RedLock (no SQL: the SQL-only methods fail).
    Redis(Box<RedisStore>),
}

/// Runs `$body` with `$p` bound to the concrete provider, whatever the variant.
macro_rules! each {
    ($store:expr, $p:ident => $body:expr) => {
        match $store {
            Store::Postgres($p) => $body,
            Store::MySql($p) => $body,
            Store::Sqlite($p) => $body,
            Store::Redis(_) => unreachable!("Redis is handled before"),
        }
    };
}

/// The pool, or its error with the cause a bare "pool timed out" hides: sqlx retries refused
/// connections silently until the acquire timeout, so one direct attempt tells why.
async fn explained<C: sqlx::Connection, P>(
    pool: Result<P, sqlx::Error>,
    url: &str,
    timeout: Duration,
) -> anyhow::Result<P> {
    match pool {
        Ok(pool) => Ok(pool),
        Err(sqlx::Error::PoolTimedOut) => {
            let cause = match tokio::time::timeout(timeout, C::connect(url)).await {
                Ok(Err(cause)) => format!("a direct connection attempt failed: {cause}"),
                Ok(Ok(connection)) => {
                    let _ = connection.close().await;
                    "a direct connection attempt succeeded".to_owned()
                }
                Err(_) => format!("a direct connection attempt got no answer within {timeout:?}"),
            };
            Err(anyhow::anyhow!("{} ({cause})", sqlx::Error::PoolTimedOut))
        }
        Err(error) => Err(error.into()),
    }
}

/// A journal-table statement; the table name is generated by the harness (a plain identifier).
fn sql(text: String) -> SqlStr {
    use sqlx::SqlSafeStr as _;
    AssertSqlSafe(text).into_sql_str()
}

impl Store {
    /// Connects (failing within the acquire timeout when the database does not answer) and
    /// builds the provider on the configured table and holder.
    ///
    /// # Errors
    /// The driver's error, with the URL, when the database cannot be reached. sqlx's pool
    /// reports only "pool timed out" when connections keep being refused; the cause is then
    /// learnt from one direct connection attempt and added.
    pub async fn connect(config: &StoreConfig) -> anyhow::Result<Store> {
        let url = &config.url;
        let context = || format!("cannot connect to {} at {url}", config.backend);
        let timeout = config.acquire_timeout;
        let store = match config.backend {
            Backend::Redis | Backend::RedLock | Backend::Etcd => Store::Redis(Box::new(
                RedisStore::connect(config).await.with_context(context)?,
            )),
            Backend::Postgres => {
                let pool = PgPoolOptions::new()
                    .max_connections(config.max_connections)
                    .acquire_timeout(timeout)
                    .connect(url)
                    .await;
                let pool = explained::<sqlx::PgConnection, _>(pool, url, timeout)
                    .await
                    .with_context(context)?;
                Store::Postgres(
                    PgLockProvider::builder(pool)
                        .table(&config.lock_table)
                        .holder(&config.holder)
                        .build()?,
                )
            }
            Backend::MySql => {
                let pool = MySqlPoolOptions::new()
                    .max_connections(config.max_connections)
                    .acquire_timeout(timeout)
                    .connect(url)
                    .await;
                let pool = explained::<sqlx::MySqlConnection, _>(pool, url, timeout)
                    .await
                    .with_context(context)?;
                Store::MySql(
                    MySqlLockProvider::builder(pool)
                        .table(&config.lock_table)
                        .holder(&config.holder)
                        .build()?,
                )
            }
            Backend::Sqlite => {
                let options = SqliteConnectOptions::from_str(url)
                    .with_context(context)?
                    .create_if_missing(true)
                    .journal_mode(SqliteJournalMode::Wal)
                    // As the provider's `connect` (sqlx's default): a shorter wait loses ticks
                    // on a loaded host.
                    .busy_timeout(Duration::from_secs(5));
                let pool = SqlitePoolOptions::new()
                    .max_connections(config.max_connections)
                    .acquire_timeout(timeout)
                    .connect_with(options)
                    .await
                    .with_context(context)?;
                Store::Sqlite(
                    SqliteLockProvider::builder(pool)
                        .table(&config.lock_table)
                        .holder(&config.holder)
                        .build()?,
                )
            }
        };
        Ok(store)
    }

    /// The provider, shared, for a scheduler or an election.
    pub fn provider(&self) -> Arc<dyn LockProvider> {
        if let Store::Redis(r) = self {
            return r.provider();
        }
        each!(self, p => Arc::new(p.clone()) as Arc<dyn LockProvider>)
    }

    /// Creates the lock table and the journal table.
    ///
    /// # Errors
    /// When the database refuses.
    pub async fn create_tables(&self, journal: &str) -> anyhow::Result<()> {
        if let Store::Redis(r) = self {
            return r.drop_journal(journal).await;
        }
        each!(self, p => p.create_schema().await)?;
        let id = match self {
            Store::Postgres(_) => "id BIGSERIAL PRIMARY KEY",
            Store::MySql(_) => "id BIGINT AUTO_INCREMENT PRIMARY KEY",
            Store::Sqlite(_) | Store::Redis(_) => "id INTEGER PRIMARY KEY AUTOINCREMENT",
        };
        self.execute(&format!(
            "CREATE TABLE IF NOT EXISTS {journal} ({id}, lock_name VARCHAR(64) NOT NULL, \
             token BIGINT NOT NULL, holder VARCHAR(255) NOT NULL, tick BIGINT NOT NULL, \
             start_us BIGINT NOT NULL, end_us BIGINT NOT NULL)"
        ))
        .await
    }

    /// Drops both tables (best effort: a run's clean-up must not hide its result).
    pub async fn drop_tables(&self, journal: &str) {
        if let Store::Redis(r) = self {
            if let Err(error) = r.drop_journal(journal).await {
                tracing::warn!(%error, journal, "could not drop the Redis journal");
            }
            return;
        }
        let lock_table = each!(self, p => p.table().to_owned());
        for table in [journal, lock_table.as_str()] {
            if let Err(error) = self.execute(&format!("DROP TABLE IF EXISTS {table}")).await {
                tracing::warn!(%error, table, "could not drop a harness table");
            }
        }
    }

    /// Runs one statement written by the harness.
    ///
    /// # Errors
    /// The database's error.
    pub async fn execute(&self, statement: &str) -> anyhow::Result<()> {
        anyhow::ensure!(!matches!(self, Store::Redis(_)), "no SQL on Redis");
        let query = sqlx::raw_sql(sql(statement.to_owned()));
        each!(self, p => query.execute(p.pool()).await.map(drop))
            .with_context(|| statement.to_owned())
    }

    /// The journal row of an execution, in its own transaction behind the fencing guard:
    /// `verify_lease(lock, token)` then `INSERT`, then commit.
    pub async fn fenced_write(&self, journal: &str, row: &JournalRow) -> WriteOutcome {
        if let Store::Redis(r) = self {
            return r.fenced_write(journal, row).await;
        }
        let insert = format!(
            "INSERT INTO {journal} (lock_name, token, holder, tick, start_us, end_us) \
             VALUES ({})",
            match self {
                Store::Postgres(_) => "$1, $2, $3, $4, $5, $6",
                _ => "?, ?, ?, ?, ?, ?",
            }
        );
        let token = u64::try_from(row.token).unwrap_or(u64::MAX);
        let result: Result<(), String> = each!(self, p => {
            async {
                let mut tx = match self {
                    // SQLite's guard is a write: take the write lock up front.
                    Store::Sqlite(_) => p.pool().begin_with("BEGIN IMMEDIATE").await,
                    _ => p.pool().begin().await,
                }
                .map_err(|e| format!("begin: {e}"))?;
                match p.verify_lease(&mut tx, &row.lock, token).await {
                    Ok(()) => {}
                    Err(Error::LockLost { .. }) => return Err("rejected".to_owned()),
                    Err(e) => return Err(format!("verify_lease: {e}")),
                }
                sqlx::query(sql(insert.clone()))
                    .bind(&row.lock)
                    .bind(row.token)
                    .bind(&row.holder)
                    .bind(row.tick)
                    .bind(row.start)
                    .bind(row.end)
                    .execute(&mut *tx)
                    .await
                    .map_err(|e| format!("insert: {e}"))?;
                tx.commit().await.map_err(|e| format!("commit: {e}"))
            }
            .await
        });
        match result {
            Ok(()) => WriteOutcome::Accepted,
            Err(e) if e == "rejected" => WriteOutcome::Rejected,
            Err(e) => WriteOutcome::Failed(e),
        }
    }

    /// The lock table's rows, as the provider reads them.
    ///
    /// # Errors
    /// The provider's error.
    pub async fn list_locks(&self) -> Result<Vec<LockRecord>, Error> {
        if matches!(self, Store::Redis(_)) {
            return Err(Error::invalid_config(
                "backend",
                "a SQL provider method, not on Redis",
            ));
        }
        each!(self, p => p.list_locks(&LockQuery::all()).await)
    }

    /// One row of the lock table, as the provider reads it.
    ///
    /// # Errors
    /// The provider's error.
    pub async fn lock_record(&self, name: &str) -> Result<Option<LockRecord>, Error> {
        if matches!(self, Store::Redis(_)) {
            return Err(Error::invalid_config(
                "backend",
                "a SQL provider method, not on Redis",
            ));
        }
        each!(self, p => p.lock_record(name).await)
    }

    /// The provider's `create_schema`.
    ///
    /// # Errors
    /// The provider's error.
    pub async fn create_schema(&self) -> Result<(), Error> {
        if matches!(self, Store::Redis(_)) {
            return Err(Error::invalid_config(
                "backend",
                "a SQL provider method, not on Redis",
            ));
        }
        each!(self, p => p.create_schema().await)
    }

    /// Rows of a query whose columns are all text (cast them in the SQL), for tests that read
    /// tables of any shape.
    ///
    /// # Errors
    /// The database's error.
    pub async fn fetch_text(&self, query: &str) -> anyhow::Result<Vec<Vec<Option<String>>>> {
        anyhow::ensure!(!matches!(self, Store::Redis(_)), "no SQL on Redis");
        use sqlx::Row as _;
        let statement = sql(query.to_owned());
        let rows = each!(self, p => {
            sqlx::query(statement)
                .fetch_all(p.pool())
                .await?
                .iter()
                .map(|row| (0..row.len()).map(|i| row.try_get::<Option<String>, _>(i)).collect())
                .collect::<Result<Vec<Vec<_>>, sqlx::Error>>()
        })
        .with_context(|| query.to_owned())?;
        Ok(rows)
    }

    /// Every journal row, in commit order.
    ///
    /// # Errors
    /// The database's error.
    pub async fn journal(&self, journal: &str) -> anyhow::Result<Vec<JournalRow>> {
        if let Store::Redis(r) = self {
            return r.journal(journal).await;
        }
        let select = sql(format!(
            "SELECT id, lock_name, token, holder, tick, start_us, end_us FROM {journal} ORDER BY id"
        ));
        type Row = (i64, String, i64, String, i64, i64, i64);
        let rows: Vec<Row> = each!(self, p => sqlx::query_as(select).fetch_all(p.pool()).await)?;
        Ok(rows
            .into_iter()
            .map(|(id, lock, token, holder, tick, start, end)| JournalRow {
                id,
                lock,
                token,
                holder,
                tick,
                start,
                end,
            })
            .collect())
    }
}
