//! `SqliteLockProvider` on a database file and in memory: the conformance suite, the SQL
//! provider cases, and SQLite specifics (busy databases, time formats, the fencing guard).
//! Needs no server.

mod common;

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shedlock_core::{Error, LockProvider, Operation};
#[allow(unused_imports)]
use shedlock_core::{LockInspector as _, LockQuery, LockRecord};
use shedlock_runtime::{LockingTaskExecutor, TaskResult};
use shedlock_sqlx::SqliteLockProvider;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions};
use sqlx::{AssertSqlSafe, Connection, Executor, SqliteConnection, SqlitePool};

use common::scenarios::ProviderExt;
use common::{harness_over, lease_config, takeover_waits_for_commit, unique_table};

/// A fresh database file under Cargo's scratch directory for integration tests.
fn database_url() -> String {
    let file =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{}.db", unique_table("shedlock")));
    format!("sqlite://{}", file.display())
}

async fn file_provider() -> SqliteLockProvider {
    let provider = SqliteLockProvider::connect(&database_url())
        .await
        .expect("open database file");
    provider.create_schema().await.expect("create schema");
    provider
}

async fn memory_provider() -> SqliteLockProvider {
    let provider = SqliteLockProvider::connect("sqlite::memory:")
        .await
        .expect("open in-memory database");
    provider.create_schema().await.expect("create schema");
    provider
}

mod conformance_memory {
    use super::*;
    shedlock_conformance::conformance_tests!(async { Some(harness_over(memory_provider().await)) });

    mod inspection {
        use super::*;
        shedlock_conformance::inspection_tests!(async {
            Some(harness_over(memory_provider().await))
        });
    }

    mod runs {
        use super::*;
        shedlock_conformance::runs_tests!(async { Some(harness_over(memory_provider().await)) });
    }

    /// The fleet's board in memory: one connection, none of the provider's own.
    mod fleet {
        use super::*;
        shedlock_conformance::fleet_tests!(async {
            Some(common::board::BoardHarness::new(memory_provider().await))
        });
    }
}

/// A provider (its table created) on a pool of 4 connections to the database file at `url`,
/// in `journal_mode` and with `busy_timeout`, as a user might build it; and the options, for
/// other programs' connections to the file.
async fn provider_in_mode(
    url: &str,
    journal_mode: SqliteJournalMode,
    busy_timeout: Duration,
) -> (SqliteLockProvider, SqliteConnectOptions) {
    let options = SqliteConnectOptions::from_str(url)
        .unwrap()
        .create_if_missing(true)
        .journal_mode(journal_mode)
        .busy_timeout(busy_timeout);
    let pool = SqlitePoolOptions::new()
        .max_connections(4)
        .connect_with(options.clone())
        .await
        .unwrap();
    let provider = SqliteLockProvider::new(pool);
    provider.create_schema().await.unwrap();
    (provider, options)
}

/// A provider on a file in `journal_mode`, with another program's connections on the same
/// file for as long as the test runs: one reading in short transactions (which, in
/// rollback-journal mode, makes commits wait and can make them fail), one writing a table of
/// its own (which takes the file's write lock between the provider's statements).
async fn busy_file_provider(journal_mode: SqliteJournalMode) -> SqliteLockProvider {
    let (provider, options) =
        provider_in_mode(&database_url(), journal_mode, Duration::from_secs(5)).await;
    let table = provider.table().to_owned();
    tokio::spawn(async move {
        let mut reader = SqliteConnection::connect_with(&options).await.unwrap();
        let mut writer = SqliteConnection::connect_with(&options).await.unwrap();
        writer
            .execute("CREATE TABLE IF NOT EXISTS neighbour (v INTEGER)")
            .await
            .unwrap();
        let count = format!("SELECT count(*) FROM {table}");
        // Busy answers are part of sharing a file: the neighbour shrugs them off.
        loop {
            if reader.execute("BEGIN").await.is_ok() {
                let _ = reader.execute(AssertSqlSafe(count.clone())).await;
                tokio::time::sleep(Duration::from_millis(2)).await;
                let _ = reader.execute("COMMIT").await;
            }
            let _ = writer.execute("INSERT INTO neighbour VALUES (1)").await;
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    });
    provider
}

/// The conformance suite on a file in WAL mode (what `connect` sets up), shared with a reader
/// and a writer of another program.
mod conformance_wal_shared {
    use super::*;
    shedlock_conformance::conformance_tests!(async {
        Some(harness_over(
            busy_file_provider(SqliteJournalMode::Wal).await,
        ))
    });
}

/// The conformance suite on a file in rollback-journal mode (`DELETE`, SQLite's default for a
/// pool the user builds), shared with a reader and a writer of another program.
mod conformance_rollback_journal_shared {
    use super::*;
    shedlock_conformance::conformance_tests!(async {
        Some(harness_over(
            busy_file_provider(SqliteJournalMode::Delete).await,
        ))
    });
}

test_db!(Sqlite(SqlitePool) for SqliteLockProvider {
    timestamp: "TEXT",
    java: None,
    enforces_varchar: false,
    statements: [1, 1, 1, 1, 1],
    batch_statements: [1, 1, 1],
    run_statements: [2, 1, 1],
    together_statements: [2, 1, 1],
    old_run_table: "CREATE TABLE {r} (lock_name VARCHAR(64) NOT NULL, fencing_token INTEGER NOT NULL, \
                    attempt INTEGER NOT NULL, job VARCHAR(255) NOT NULL, tick TEXT, \
                    holder VARCHAR(255) NOT NULL, started_at TEXT NOT NULL, finished_at TEXT, \
                    outcome VARCHAR(16) NOT NULL, error VARCHAR(2000), \
                    PRIMARY KEY (lock_name, fencing_token, attempt)); \
                    CREATE INDEX IF NOT EXISTS {r}_started ON {r} (started_at)",
    index_names: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = '{r}'",
    clock_query: "SELECT strftime('%Y-%m-%d %H:%M:%f', 'now')",
    schema_query: "SELECT 'main'",
});

sql_provider_tests!(Sqlite, async { Some(file_provider().await.pool().clone()) });
sql_run_cases!(async {
    Some(Sqlite {
        pool: file_provider().await.pool().clone(),
    })
});

/// Every `sqlite::memory:` connection is a database of its own.
#[tokio::test]
async fn memory_databases_are_separate() {
    let (a, b) = (memory_provider().await, memory_provider().await);
    let c = lease_config("separate", Duration::from_secs(60));
    assert!(a.acquire(&c).await.unwrap().is_some());
    assert!(b.acquire(&c).await.unwrap().is_some());
}

/// While another connection holds the write lock past the busy timeout, acquire reads as
/// "not acquired" and release as a store error: neither panics nor hangs.
#[tokio::test]
async fn busy_database_means_not_acquired() {
    let url = database_url();
    let provider = SqliteLockProvider::connect(&url).await.unwrap();
    provider.create_schema().await.unwrap();
    let c = lease_config("busy", Duration::from_secs(60));
    let lease = provider.acquire(&c).await.unwrap().expect("acquired");
    assert!(provider.release(&lease).await.unwrap());

    let other_process = SqlitePool::connect(&url).await.unwrap();
    let blocker = other_process.begin_with("BEGIN IMMEDIATE").await.unwrap();
    let started = Instant::now();
    assert!(
        provider.acquire(&c).await.unwrap().is_none(),
        "acquired a busy database"
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "waited {:?}",
        started.elapsed()
    );
    let result = provider.release(&lease).await;
    assert!(
        matches!(
            &result,
            Err(Error::Store {
                operation: Operation::Release,
                ..
            })
        ),
        "{result:?}"
    );
    blocker.rollback().await.unwrap();
    assert!(provider.acquire(&c).await.unwrap().is_some(), "free again");
}

/// A pool in rollback-journal mode (`journal_mode=DELETE`, SQLite's default for a pool the
/// user builds), with a short busy timeout.
async fn rollback_journal_provider(url: &str) -> (SqliteLockProvider, SqliteConnectOptions) {
    provider_in_mode(url, SqliteJournalMode::Delete, Duration::from_millis(200)).await
}

/// Another connection (another process) with an open read transaction, as any reader of the
/// file may hold: in rollback-journal mode, a writer's COMMIT waits for it and then fails.
async fn open_reader(options: &SqliteConnectOptions, table: &str) -> SqliteConnection {
    let mut reader = SqliteConnection::connect_with(options).await.unwrap();
    reader.execute("BEGIN").await.unwrap();
    let _: i64 = sqlx::query_scalar(AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
        .fetch_one(&mut reader)
        .await
        .unwrap();
    reader
}

/// A lock statement whose COMMIT fails grants nothing: in rollback-journal mode a reader makes
/// the autocommit COMMIT after the `RETURNING` row fail ("database is locked"). Reading only
/// that row reported a lease the database rolled back, and a second holder then got the same
/// lock with the same token.
#[tokio::test]
async fn failed_commit_is_never_a_grant() {
    let (provider, options) = rollback_journal_provider(&database_url()).await;
    let (a, b) = (provider.clone_as("a"), provider.clone_as("b"));
    let c = lease_config("commit", Duration::from_secs(60));
    let reader = open_reader(&options, a.table()).await;
    let first = a.acquire(&c).await;
    assert!(
        !matches!(first, Ok(Some(_))),
        "a lease whose COMMIT failed was granted: {first:?}"
    );
    drop(reader);
    let second = b.acquire(&c).await.unwrap().expect("nothing was committed");
    assert_eq!(a.lock_record("commit").await.unwrap().unwrap().holder, "b");
    assert!(b.release(&second).await.unwrap());
}

/// An extension whose COMMIT fails is no extension: the holder must not believe its lease
/// runs longer than the table says.
#[tokio::test]
async fn failed_commit_is_never_an_extension() {
    let (provider, options) = rollback_journal_provider(&database_url()).await;
    let c = lease_config("extend-commit", Duration::from_secs(60));
    let lease = provider.acquire(&c).await.unwrap().expect("free");
    let reader = open_reader(&options, provider.table()).await;
    let extended = provider
        .extend(&lease, Duration::from_secs(3600), Duration::ZERO)
        .await;
    assert!(
        !matches!(extended, Ok(Some(_))),
        "an extension whose COMMIT failed was reported: {extended:?}"
    );
    drop(reader);
    let row = provider
        .lock_record("extend-commit")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        row.lock_until,
        lease.lock_until(),
        "the table kept the old end"
    );
}

/// Several pools on one file (as several processes would be) keep mutual exclusion under
/// contention: plain counters incremented under the lock lose no update.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pools_sharing_a_file_exclude_each_other() {
    let url = database_url();
    let first = SqliteLockProvider::connect(&url).await.unwrap();
    first.create_schema().await.unwrap();
    let counter = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut workers = Vec::new();
    for process in 0..3 {
        let provider = SqliteLockProvider::connect(&url)
            .await
            .unwrap()
            .clone_as(&format!("p{process}"));
        let executor = LockingTaskExecutor::new(provider);
        let counter = Arc::clone(&counter);
        workers.push(tokio::spawn(async move {
            let c = lease_config("shared", Duration::from_secs(60));
            let mut done = 0;
            while done < 20 {
                let outcome = executor
                    .execute(&c, async {
                        let seen = counter.load(std::sync::atomic::Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_millis(1)).await;
                        counter.store(seen + 1, std::sync::atomic::Ordering::SeqCst);
                    })
                    .await
                    .expect("no store error under contention");
                if let TaskResult::Executed(()) = outcome {
                    done += 1;
                }
            }
        }));
    }
    for worker in workers {
        worker.await.unwrap();
    }
    assert_eq!(counter.load(std::sync::atomic::Ordering::SeqCst), 60);
}

/// Set in the child processes of `processes_sharing_a_file_exclude_each_other`:
/// `<database url>|<counter file>|<holder>`.
const CHILD: &str = "SHEDLOCK_SQLITE_TEST_CHILD";
const INCREMENTS_PER_PROCESS: u64 = 15;

/// Three processes on one database file (the quickstart's set-up) keep mutual exclusion: each
/// increments a counter in a plain file, read and written back only under the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_sharing_a_file_exclude_each_other() {
    if let Ok(spec) = std::env::var(CHILD) {
        return increment_under_lock(&spec).await;
    }
    let url = database_url();
    let provider = SqliteLockProvider::connect(&url).await.unwrap();
    provider.create_schema().await.unwrap();
    let counter = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(unique_table("counter"));
    std::fs::write(&counter, "0").unwrap();
    let children: Vec<_> = (0..3)
        .map(|process| {
            std::process::Command::new(std::env::current_exe().unwrap())
                .args([
                    "--exact",
                    "processes_sharing_a_file_exclude_each_other",
                    "--quiet",
                ])
                .env(
                    CHILD,
                    format!("{url}|{}|process-{process}", counter.display()),
                )
                .stdout(std::process::Stdio::null()) // failures still show on stderr
                .spawn()
                .expect("start a child process")
        })
        .collect();
    for mut child in children {
        let status = tokio::task::spawn_blocking(move || child.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(status.success(), "child process failed: {status}");
    }
    let total: u64 = std::fs::read_to_string(&counter).unwrap().parse().unwrap();
    assert_eq!(
        total,
        3 * INCREMENTS_PER_PROCESS,
        "lost updates across processes"
    );
}

async fn increment_under_lock(spec: &str) {
    let mut parts = spec.split('|');
    let (url, counter, holder) = (
        parts.next().unwrap(),
        parts.next().unwrap(),
        parts.next().unwrap(),
    );
    let provider = SqliteLockProvider::connect(url)
        .await
        .unwrap()
        .clone_as(holder);
    let executor = LockingTaskExecutor::new(provider);
    let lock = lease_config("cross-process", Duration::from_secs(60));
    let mut done = 0;
    while done < INCREMENTS_PER_PROCESS {
        let outcome = executor
            .execute(&lock, async {
                let seen: u64 = std::fs::read_to_string(counter).unwrap().parse().unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
                std::fs::write(counter, (seen + 1).to_string()).unwrap();
            })
            .await
            .expect("no store error under contention");
        if let TaskResult::Executed(()) = outcome {
            done += 1;
        } else {
            tokio::task::yield_now().await;
        }
    }
}

/// Times written by hand in other formats SQLite understands compare as times; a time SQLite
/// cannot read counts as held (a corrupt value never grants the lock).
#[tokio::test]
async fn hand_written_time_formats_compare_as_times() {
    let provider = file_provider().await;
    let t = provider.table();
    provider
        .pool()
        .execute(AssertSqlSafe(format!(
            "INSERT INTO {t} (name, lock_until, locked_at, locked_by) VALUES \
             ('iso-future', '2999-01-01T00:00:00Z', '2020-01-01T00:00:00Z', 'x'), \
             ('iso-past', '2020-01-01T10:00:00+02:00', '2020-01-01T00:00:00', 'x'), \
             ('garbage', 'soon', 'earlier', 'x')"
        )))
        .await
        .unwrap();
    let c = |name| lease_config(name, Duration::from_secs(60));
    assert!(provider.acquire(&c("iso-future")).await.unwrap().is_none());
    assert!(provider.acquire(&c("iso-past")).await.unwrap().is_some());
    assert!(provider.acquire(&c("garbage")).await.unwrap().is_none());
    let future = provider.lock_record("iso-future").await.unwrap().unwrap();
    assert!(future.held);
    assert_eq!(
        chrono::DateTime::<chrono::Utc>::from(future.lock_until).to_rfc3339(),
        "2999-01-01T00:00:00+00:00"
    );
}

/// The fencing guard: a live lease may write; a paused holder whose lease was taken over is
/// refused; and while a guarded transaction runs, a takeover waits for it.
#[tokio::test]
async fn fencing_guard_orders_writes() {
    let a = file_provider().await.clone_as("a");
    let b = a.clone_as("b");
    let pool = a.pool().clone();
    pool.execute("CREATE TABLE fenced_data (token INTEGER)")
        .await
        .unwrap();
    let lease_len = Duration::from_millis(300);
    let c = lease_config("fenced", lease_len);
    let paused = a.acquire(&c).await.unwrap().unwrap();
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.unwrap();
    a.verify_lease(&mut tx, "fenced", paused.fencing_token())
        .await
        .expect("live lease");
    sqlx::query("INSERT INTO fenced_data VALUES (?)")
        .bind(paused.fencing_token() as i64)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx.commit().await.unwrap();

    tokio::time::sleep(lease_len + Duration::from_millis(100)).await;
    let current = b.acquire(&c).await.unwrap().expect("taken over");
    let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.unwrap();
    let stale = a
        .verify_lease(&mut tx, "fenced", paused.fencing_token())
        .await;
    assert!(matches!(stale, Err(Error::LockLost { .. })), "{stale:?}");
    tx.rollback().await.unwrap();

    let mut tx = pool.begin().await.unwrap();
    b.verify_lease(&mut tx, "fenced", current.fencing_token())
        .await
        .expect("live lease");
    tokio::time::sleep(lease_len + Duration::from_millis(100)).await;
    let commit = async { tx.commit().await.unwrap() };
    takeover_waits_for_commit(&a, &c, &current, Duration::from_millis(200), commit).await;
}
