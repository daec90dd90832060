//! What a run's store is: which backend, where, and the rows of the journal it keeps. Both
//! [`Store`](crate::Store) and the Redis side (`journal_on_redis`) read these.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

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
