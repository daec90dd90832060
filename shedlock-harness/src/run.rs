//! One run's database state: a lock table and a journal table of its own (so runs never
//! collide, even on a shared server), the supervisor's own connection, and clean-up.

use std::path::PathBuf;

use shedlock_conformance::{env::env_url, unique_table};

use crate::backend::{Backend, JournalRow, StoreConfig};
use crate::journal_on_redis::redlock_url;
use crate::store::{DEFAULT_ACQUIRE_TIMEOUT, Store};
use crate::worker::WorkerOptions;

/// The URL of the test server for `backend` from its environment variable.
///
/// Without it, prints one `skipped:` line saying how to run the test, and returns `None`.
/// SQLite needs no server: a fresh file in the temp directory.
///
/// # Panics
/// When the variable is missing and `CI=true`: on CI a missing database is a failure.
pub fn database_url(backend: Backend) -> Option<String> {
    let Some(var) = backend.url_var() else {
        let file = std::env::temp_dir().join(format!("{}.db", unique_table("shedlock-harness")));
        return Some(format!("sqlite://{}", file.display()));
    };
    let what = format!("the {backend} harness");
    if matches!(backend, Backend::RedLock | Backend::Etcd) {
        // The journal lives on the single Redis test server, apart from the locks.
        let journal = database_url(Backend::Redis)?;
        let masters = env_url(var, &what, backend.example_url())?;
        return Some(redlock_url(&journal, &masters));
    }
    env_url(var, &what, backend.example_url())
}

/// The tables of one run and the supervisor's connection to them.
#[derive(Debug)]
pub struct Run {
    /// The database kind.
    pub backend: Backend,
    /// Its URL.
    pub url: String,
    /// The lock table of this run.
    pub lock_table: String,
    /// The journal table of this run.
    pub journal_table: String,
    /// The supervisor's own store (holder `supervisor`).
    pub store: Store,
}

impl Run {
    /// Creates this run's tables.
    ///
    /// # Errors
    /// When the database cannot be reached or refuses.
    pub async fn create(backend: Backend, url: &str) -> anyhow::Result<Run> {
        // One suffix for both, so the journal of a kept lock table is easy to find.
        let suffix = unique_table("h");
        let config = StoreConfig {
            backend,
            url: url.to_owned(),
            lock_table: format!("shedlock_{suffix}"),
            journal_table: format!("journal_{suffix}"),
            holder: "supervisor".to_owned(),
            max_connections: 2,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
        };
        let store = Store::connect(&config).await?;
        store.create_tables(&config.journal_table).await?;
        Ok(Run {
            backend,
            url: config.url,
            lock_table: config.lock_table,
            journal_table: config.journal_table,
            store,
        })
    }

    /// Options for worker `index` (holder `worker-<index>`) on `locks`, with the defaults of
    /// [`WorkerOptions::new`].
    pub fn worker(&self, index: usize, locks: &[String]) -> WorkerOptions {
        WorkerOptions::new(
            StoreConfig {
                backend: self.backend,
                url: self.url.clone(),
                lock_table: self.lock_table.clone(),
                journal_table: self.journal_table.clone(),
                holder: format!("worker-{index}"),
                max_connections: 4,
                acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
            },
            locks.to_vec(),
        )
    }

    /// The journal, in commit order.
    ///
    /// # Errors
    /// When the database fails.
    pub async fn journal(&self) -> anyhow::Result<Vec<JournalRow>> {
        self.store.journal(&self.journal_table).await
    }

    /// Whether another process could write now: on SQLite, whether no process holds the
    /// database's write lock (checked without waiting); always true for the servers, where a
    /// stopped client holds no lock outside an open transaction.
    pub async fn write_lock_free(&self) -> bool {
        use sqlx::Connection as _;
        use std::str::FromStr as _;
        let Backend::Sqlite = self.backend else {
            return true;
        };
        let Ok(options) = sqlx::sqlite::SqliteConnectOptions::from_str(&self.url) else {
            return false;
        };
        let Ok(mut connection) =
            sqlx::SqliteConnection::connect_with(&options.busy_timeout(std::time::Duration::ZERO))
                .await
        else {
            return false;
        };
        sqlx::raw_sql("BEGIN IMMEDIATE; ROLLBACK")
            .execute(&mut connection)
            .await
            .is_ok()
    }

    /// Drops the run's tables (and the SQLite file).
    pub async fn cleanup(self) {
        self.store.drop_tables(&self.journal_table).await;
        if let Some(path) = self.url.strip_prefix("sqlite://") {
            drop(self.store);
            for suffix in ["", "-wal", "-shm"] {
                let _ = std::fs::remove_file(PathBuf::from(format!("{path}{suffix}")));
            }
        }
    }
}

/// `count` lock names `<prefix>-000`, `<prefix>-001`, …
pub fn lock_names(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i:03}")).collect()
}
