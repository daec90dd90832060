//! The three databases: where they are, the pools the benchmarks open, providers on them.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use shedlock::provider::default_holder;
use shedlock::sql::SqlLockProvider;
use shedlock::sql::dialect::{Dialect, MySql, Pg, Sqlite};
use shedlock::{
    LockProvider, sql::MySqlLockProvider, sql::PgLockProvider, sql::SqliteLockProvider,
};
use sqlx::mysql::MySqlConnectOptions;
use sqlx::pool::PoolOptions;
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode};
use sqlx::{ConnectOptions, Connection, MySqlConnection, PgConnection, SqliteConnection};

/// A database under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Db {
    Postgres,
    Mysql,
    Sqlite,
}

impl Db {
    pub(crate) const ALL: [Db; 3] = [Db::Postgres, Db::Mysql, Db::Sqlite];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Db::Postgres => "postgres",
            Db::Mysql => "mysql",
            Db::Sqlite => "sqlite",
        }
    }
}

impl FromStr for Db {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        Db::ALL
            .into_iter()
            .find(|db| db.name() == s)
            .ok_or_else(|| anyhow::anyhow!("unknown database {s:?}: postgres, mysql or sqlite"))
    }
}

/// How a pool is configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PoolKind {
    /// One connection per worker (SQLite: up to 4, its single writer makes more useless) and no
    /// ping before each checkout (`test_before_acquire(false)`): what a pool used for locks
    /// should look like.
    Tuned,
    /// The pool `PgLockProvider::connect(url)` (and the others' `connect`) opens: the
    /// README's path.
    ProviderConnect,
}

/// A pool of one of the databases.
#[derive(Debug, Clone)]
pub(crate) enum Pool {
    Pg(sqlx::PgPool),
    My(sqlx::MySqlPool),
    Lite(sqlx::SqlitePool),
}

/// A connection outside any pool.
#[derive(Debug)]
pub(crate) enum Dedicated {
    Pg(PgConnection),
    My(MySqlConnection),
    Lite(SqliteConnection),
}

/// Where the databases are.
#[derive(Debug, Clone)]
pub(crate) struct Databases {
    pub(crate) postgres: String,
    pub(crate) mysql: String,
    /// A file in a directory of its own, removed at exit.
    pub(crate) sqlite_file: PathBuf,
}

/// The options of a [`PoolKind::Tuned`] pool of `size` connections.
fn tuned<DB: sqlx::Database>(size: u32) -> PoolOptions<DB> {
    PoolOptions::new()
        .max_connections(size)
        .test_before_acquire(false)
}

/// `D`'s provider on `pool` for `table`, acquiring as `holder`, keeping `dedicated` connections
/// of its own (`None`: the default, the pool's `max_connections`).
pub(crate) fn sql_provider<D: Dialect>(
    pool: &sqlx::Pool<D::Database>,
    table: &str,
    holder: &str,
    dedicated: Option<usize>,
) -> anyhow::Result<SqlLockProvider<D>> {
    let builder = SqlLockProvider::<D>::builder(pool.clone())
        .table(table)
        .holder(holder);
    let builder = match dedicated {
        Some(n) => builder.dedicated_connections(n),
        None => builder,
    };
    Ok(builder.build()?)
}

/// Creates `table` on `pool` (with `D`'s provider) if needed.
async fn create_schema<D: Dialect>(
    pool: &sqlx::Pool<D::Database>,
    table: &str,
) -> anyhow::Result<()> {
    let provider = sql_provider::<D>(pool, table, default_holder(), None)?;
    Ok(provider.create_schema().await?)
}

/// How long SQLite statements wait for the write lock (as `SqliteLockProvider::connect`).
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(1);

impl Databases {
    /// `SHEDLOCK_TEST_PG_URL` / `SHEDLOCK_TEST_MYSQL_URL` or the local defaults, and a fresh
    /// SQLite file.
    pub(crate) fn from_env() -> anyhow::Result<Self> {
        let var = |name: &str, default: &str| {
            std::env::var(name)
                .ok()
                .filter(|url| !url.is_empty())
                .unwrap_or_else(|| default.to_owned())
        };
        let dir = std::env::temp_dir().join(format!("shedlock-bench-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Databases {
            postgres: var(
                "SHEDLOCK_TEST_PG_URL",
                "postgres://root@127.0.0.1:5432/test",
            ),
            mysql: var(
                "SHEDLOCK_TEST_MYSQL_URL",
                "mysql://root@127.0.0.1:3306/test",
            ),
            sqlite_file: dir.join("locks.db"),
        })
    }

    pub(crate) fn url(&self, db: Db) -> String {
        match db {
            Db::Postgres => self.postgres.clone(),
            Db::Mysql => self.mysql.clone(),
            Db::Sqlite => format!("sqlite://{}", self.sqlite_file.display()),
        }
    }

    fn sqlite_options(&self) -> SqliteConnectOptions {
        SqliteConnectOptions::new()
            .filename(&self.sqlite_file)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .busy_timeout(SQLITE_BUSY_TIMEOUT)
    }

    /// A pool for `workers` concurrent tasks.
    pub(crate) async fn pool(
        &self,
        db: Db,
        kind: PoolKind,
        workers: usize,
    ) -> anyhow::Result<Pool> {
        let size = u32::try_from(workers)?.max(1);
        Ok(match (db, kind) {
            (Db::Postgres, PoolKind::Tuned) => Pool::Pg(tuned(size).connect(&self.postgres).await?),
            (Db::Mysql, PoolKind::Tuned) => Pool::My(tuned(size).connect(&self.mysql).await?),
            (Db::Sqlite, PoolKind::Tuned) => Pool::Lite(
                tuned(size.min(4))
                    .connect_with(self.sqlite_options())
                    .await?,
            ),
            (_, PoolKind::ProviderConnect) => Pool::provider_connect(db, &self.url(db)).await?,
        })
    }

    /// One connection of its own.
    pub(crate) async fn dedicated(&self, db: Db) -> anyhow::Result<Dedicated> {
        Ok(match db {
            Db::Postgres => Dedicated::Pg(
                PgConnectOptions::from_str(&self.postgres)?
                    .connect()
                    .await?,
            ),
            Db::Mysql => Dedicated::My(
                MySqlConnectOptions::from_str(&self.mysql)?
                    .connect()
                    .await?,
            ),
            Db::Sqlite => Dedicated::Lite(self.sqlite_options().connect().await?),
        })
    }
}

impl Pool {
    /// The pool `connect(url)` of `db`'s provider opens: the README's path.
    pub(crate) async fn provider_connect(db: Db, url: &str) -> anyhow::Result<Pool> {
        Ok(match db {
            Db::Postgres => Pool::Pg(PgLockProvider::connect(url).await?.pool().clone()),
            Db::Mysql => Pool::My(MySqlLockProvider::connect(url).await?.pool().clone()),
            Db::Sqlite => Pool::Lite(SqliteLockProvider::connect(url).await?.pool().clone()),
        })
    }

    /// A provider on this pool for `table`, acquiring as `holder`, keeping `dedicated`
    /// connections of its own (`None`: the default, the pool's `max_connections`).
    pub(crate) fn provider(
        &self,
        table: &str,
        holder: &str,
        dedicated: Option<usize>,
    ) -> anyhow::Result<Arc<dyn LockProvider>> {
        Ok(match self {
            Pool::Pg(pool) => Arc::new(sql_provider::<Pg>(pool, table, holder, dedicated)?),
            Pool::My(pool) => Arc::new(sql_provider::<MySql>(pool, table, holder, dedicated)?),
            Pool::Lite(pool) => Arc::new(sql_provider::<Sqlite>(pool, table, holder, dedicated)?),
        })
    }

    /// Creates `table` if needed.
    pub(crate) async fn create_schema(&self, table: &str) -> anyhow::Result<()> {
        match self {
            Pool::Pg(pool) => create_schema::<Pg>(pool, table).await,
            Pool::My(pool) => create_schema::<MySql>(pool, table).await,
            Pool::Lite(pool) => create_schema::<Sqlite>(pool, table).await,
        }
    }

    /// Runs one statement (SQL built by the benchmarks themselves, never from input).
    pub(crate) async fn execute(&self, sql: String) -> anyhow::Result<()> {
        let sql = sqlx::AssertSqlSafe(sql);
        match self {
            Pool::Pg(pool) => {
                sqlx::query(sql).execute(pool).await?;
            }
            Pool::My(pool) => {
                sqlx::query(sql).execute(pool).await?;
            }
            Pool::Lite(pool) => {
                sqlx::query(sql).execute(pool).await?;
            }
        }
        Ok(())
    }

    pub(crate) async fn close(&self) {
        match self {
            Pool::Pg(pool) => pool.close().await,
            Pool::My(pool) => pool.close().await,
            Pool::Lite(pool) => pool.close().await,
        }
    }
}

impl Dedicated {
    pub(crate) async fn close(self) -> anyhow::Result<()> {
        match self {
            Dedicated::Pg(conn) => conn.close().await?,
            Dedicated::My(conn) => conn.close().await?,
            Dedicated::Lite(conn) => conn.close().await?,
        }
        Ok(())
    }
}
