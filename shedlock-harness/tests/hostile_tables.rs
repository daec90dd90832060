//! Lock tables edited or created by hand, and database users without write rights, on every
//! database: what the provider answers. Nothing may panic, and nothing may change another
//! lock's row (the `bystander`, held by someone else until 2999).
//!
//! Cases already covered by `shedlock-sqlx/tests` (far-future `lock_until`, negative and
//! exhausted tokens, a deleted row, a missing table, ShedLock tables without `fencing_token`,
//! SQL-looking names and identifiers, a name column narrower than the name) are not repeated;
//! docs/RELIABILITY.md lists them all.

mod common;

use std::time::{Duration, SystemTime};

use shedlock::{
    Error, LockConfiguration, LockProvider, LockingTaskExecutor, Operation, provider::LockLease,
};
use shedlock_harness::{Backend, DEFAULT_ACQUIRE_TIMEOUT, Run, Store, StoreConfig, database_url};

/// A hand-made lock table next to a run's tables, with a provider (holder `a`) on it.
struct Hostile {
    backend: Backend,
    run: Run,
    table: String,
    store: Store,
    /// The bystander's row as inserted: [`end`](Self::end) checks that nothing changed it.
    bystander: Vec<Option<String>>,
}

fn timestamp(backend: Backend) -> &'static str {
    match backend {
        Backend::Postgres => "TIMESTAMP",
        Backend::MySql => "DATETIME(3)",
        Backend::Sqlite => "TEXT",
        Backend::Redis | Backend::RedLock | Backend::Etcd => unreachable!("SQL tables only"),
    }
}

/// ShedLock's columns plus the token and the last tick, as `create_schema` makes them, for
/// editing.
fn standard_columns(backend: Backend) -> String {
    let ts = timestamp(backend);
    format!(
        "name VARCHAR(64) NOT NULL PRIMARY KEY, lock_until {ts} NOT NULL, locked_at {ts} NOT NULL, \
         locked_by VARCHAR(255) NOT NULL, fencing_token BIGINT NOT NULL DEFAULT 0, last_tick BIGINT"
    )
}

const BYSTANDER: &str = "INSERT INTO {t} (name, lock_until, locked_at, locked_by, fencing_token) \
     VALUES ('bystander', '2999-01-01 00:00:00', '2020-01-01 00:00:00', 'someone', 7)";

/// `url` connecting as `user` (no password).
fn with_user(url: &str, user: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("scheme://");
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    format!("{scheme}://{user}@{host}")
}

fn config(name: &str) -> LockConfiguration {
    LockConfiguration::new(name, Duration::from_secs(60), Duration::ZERO).unwrap()
}

fn is_store_error<T>(result: &Result<T, Error>, operation: Operation) -> bool {
    matches!(result, Err(Error::Store { operation: op, .. }) if *op == operation)
}

/// Panics, with `context` and the result, unless `result` is a store error of `operation`.
#[track_caller]
fn assert_store_error<T: std::fmt::Debug>(
    result: &Result<T, Error>,
    operation: Operation,
    context: impl std::fmt::Display,
) {
    assert!(is_store_error(result, operation), "{context}: {result:?}");
}

impl Hostile {
    /// A table with `columns` holding the bystander row (`BYSTANDER`, or `bystander` SQL when
    /// the columns need other values); `None` when the database is not configured (skipped).
    async fn new(backend: Backend, columns: &str) -> Option<Hostile> {
        Hostile::with_bystander(backend, columns, BYSTANDER).await
    }

    /// The same with ShedLock's own columns ([`standard_columns`]).
    async fn standard(backend: Backend) -> Option<Hostile> {
        Hostile::new(backend, &standard_columns(backend)).await
    }

    async fn with_bystander(backend: Backend, columns: &str, bystander: &str) -> Option<Hostile> {
        let url = database_url(backend)?;
        let run = Run::create(backend, &url).await.expect("create the run");
        let table = format!("{}_x", run.lock_table);
        run.store
            .execute(&format!("CREATE TABLE {table} ({columns})"))
            .await
            .unwrap();
        let store = Hostile::store_on(&run, &table, &url, "a").await.unwrap();
        let mut hostile = Hostile {
            backend,
            run,
            table,
            store,
            bystander: Vec::new(),
        };
        hostile.exec(bystander).await.unwrap();
        hostile.bystander = hostile.raw_row("bystander").await;
        Some(hostile)
    }

    async fn store_on(run: &Run, table: &str, url: &str, holder: &str) -> anyhow::Result<Store> {
        Store::connect(&StoreConfig {
            backend: run.backend,
            url: url.to_owned(),
            lock_table: table.to_owned(),
            journal_table: run.journal_table.clone(),
            holder: holder.to_owned(),
            max_connections: 2,
            acquire_timeout: DEFAULT_ACQUIRE_TIMEOUT,
        })
        .await
    }

    /// Runs SQL with `{t}` standing for the hand-made table.
    async fn exec(&self, sql: &str) -> anyhow::Result<()> {
        self.run
            .store
            .execute(&sql.replace("{t}", &self.table))
            .await
    }

    async fn acquire(&self, name: &str) -> Result<Option<LockLease>, Error> {
        self.store.provider().acquire(&config(name)).await
    }

    /// A row as text, read around the provider.
    async fn raw_row(&self, name: &str) -> Vec<Option<String>> {
        let text = if self.backend == Backend::MySql {
            "CHAR"
        } else {
            "TEXT"
        };
        let columns = ["lock_until", "locked_at", "locked_by", "fencing_token"]
            .map(|c| format!("CAST({c} AS {text})"))
            .join(", ");
        let query = format!("SELECT {columns} FROM {} WHERE name = '{name}'", self.table);
        self.run
            .store
            .fetch_text(&query)
            .await
            .unwrap()
            .pop()
            .unwrap_or_default()
    }

    /// Checks the bystander's row is as inserted, then drops everything.
    async fn end(self) {
        assert_eq!(
            self.raw_row("bystander").await,
            self.bystander,
            "{}: the bystander's row changed",
            self.backend
        );
        self.run
            .store
            .execute(&format!("DROP TABLE {}", self.table))
            .await
            .unwrap();
        self.run.cleanup().await;
    }
}

/// Names longer than 64 bytes, in a name column widened by hand: read back fine; such a lock
/// cannot be configured (typed error); other locks work.
#[tokio::test]
async fn names_longer_than_64_bytes_inserted_by_hand() {
    for backend in Backend::ALL {
        let columns = standard_columns(backend).replace("name VARCHAR(64)", "name VARCHAR(200)");
        let Some(h) = Hostile::new(backend, &columns).await else {
            continue;
        };
        let long = "n".repeat(100);
        h.exec(&format!(
            "INSERT INTO {{t}} (name, lock_until, locked_at, locked_by, fencing_token) \
             VALUES ('{long}', '2020-01-01 00:00:00', '2020-01-01 00:00:00', 'x', 3)"
        ))
        .await
        .unwrap();
        assert_eq!(h.store.list_locks().await.unwrap().len(), 2, "{backend}");
        assert_eq!(
            h.store
                .lock_record(&long)
                .await
                .unwrap()
                .unwrap()
                .fencing_token,
            3
        );
        assert!(matches!(
            LockConfiguration::new(long.clone(), Duration::from_secs(1), Duration::ZERO),
            Err(Error::InvalidConfig { field: "name", .. })
        ));
        assert!(
            h.acquire(&"m".repeat(64)).await.unwrap().is_some(),
            "{backend}"
        );
        h.end().await;
    }
}

/// `lock_until` declared as an integer. PostgreSQL and MariaDB: every operation is a store
/// error. SQLite has no column types: its own rows work, a number it cannot read as a time
/// counts as held (the bystander, whose time is such a number, is never granted), and
/// inspection fails on that row.
#[tokio::test]
async fn time_column_of_an_integer_type() {
    for backend in Backend::ALL {
        let ts = timestamp(backend);
        let columns =
            standard_columns(backend).replace(&format!("lock_until {ts}"), "lock_until BIGINT");
        let numeric = BYSTANDER.replace("'2999-01-01 00:00:00'", "99999999999");
        let Some(h) = Hostile::with_bystander(backend, &columns, &numeric).await else {
            continue;
        };
        let fresh = h.acquire("fresh").await;
        let list = h.store.list_locks().await;
        match backend {
            Backend::Sqlite => assert!(fresh.unwrap().is_some()),
            _ => assert_store_error(&fresh, Operation::Acquire, backend),
        }
        // The bystander's number is not a time to any of them.
        assert_store_error(&list, Operation::Read, backend);
        let raw = h.raw_row("bystander").await;
        assert_eq!(
            raw, h.bystander,
            "{backend}: acquiring another lock touched the bystander"
        );
        let taken = h.acquire("bystander").await;
        match backend {
            Backend::Sqlite => assert!(
                taken.unwrap().is_none(),
                "granted on a time SQLite cannot read"
            ),
            _ => assert_store_error(&taken, Operation::Acquire, backend),
        }
        h.end().await;
    }
}

/// `fencing_token` declared as text. PostgreSQL: store errors. MariaDB converts numbers and
/// locks work, but inspection fails. SQLite: the acquisition is written, then its token cannot
/// be decoded: a store error, and the lock stays taken until its lease ends (nobody runs).
/// A token that is not a number fails on every database.
#[tokio::test]
async fn fencing_token_column_of_a_text_type() {
    for backend in Backend::ALL {
        let columns = standard_columns(backend).replace(
            "fencing_token BIGINT NOT NULL DEFAULT 0",
            "fencing_token VARCHAR(20) NOT NULL DEFAULT '0'",
        );
        let Some(h) = Hostile::new(backend, &columns).await else {
            continue;
        };
        h.exec(
            "INSERT INTO {t} (name, lock_until, locked_at, locked_by, fencing_token) \
             VALUES ('word', '2020-01-01 00:00:00', '2020-01-01 00:00:00', 'x', 'seven')",
        )
        .await
        .unwrap();
        let first = h.acquire("fresh").await;
        let second = h.acquire("fresh").await;
        match backend {
            Backend::Postgres => {
                assert!(
                    is_store_error(&first, Operation::Acquire)
                        && is_store_error(&second, Operation::Acquire)
                );
            }
            Backend::MySql => {
                assert!(first.unwrap().unwrap().fencing_token() > 0);
                assert!(second.unwrap().is_none(), "held");
            }
            Backend::Sqlite => {
                assert!(is_store_error(&first, Operation::Acquire), "{first:?}");
                assert!(
                    second.unwrap().is_none(),
                    "written despite the error: held for its lease"
                );
            }
            Backend::Redis | Backend::RedLock | Backend::Etcd => unreachable!("SQL tables only"),
        }
        let word = h.acquire("word").await;
        assert_store_error(&word, Operation::Acquire, backend);
        let list = h.store.list_locks().await;
        assert_store_error(&list, Operation::Read, backend);
        h.end().await;
    }
}

/// Time columns with whole-second precision (`TIMESTAMP(0)`, MariaDB `DATETIME`): leases work,
/// but the stored end is rounded (PostgreSQL) or truncated (MariaDB), so a lease may end up to
/// one second before the holder's local deadline. Figures printed; fencing still protects writes.
#[tokio::test]
async fn time_columns_with_second_precision() {
    for backend in [Backend::Postgres, Backend::MySql] {
        let coarse = if backend == Backend::Postgres {
            "TIMESTAMP(0)"
        } else {
            "DATETIME"
        };
        let columns = standard_columns(backend).replace(timestamp(backend), coarse);
        let Some(h) = Hostile::new(backend, &columns).await else {
            continue;
        };
        let mut shortest = i64::MAX;
        for i in 0..6 {
            let requested = SystemTime::now();
            let lease = h
                .acquire(&format!("coarse-{i}"))
                .await
                .unwrap()
                .expect("free");
            let ms = match lease.lock_until().duration_since(requested) {
                Ok(d) => d.as_millis() as i64,
                Err(e) => -(e.duration().as_millis() as i64),
            };
            shortest = shortest.min(ms);
            assert!(h.store.provider().release(&lease).await.unwrap());
            tokio::time::sleep(Duration::from_millis(170)).await;
        }
        println!(
            "{backend} {coarse}: shortest lease of 60000 ms ended {shortest} ms after the request"
        );
        assert!(
            (59_000..=61_000).contains(&shortest),
            "{backend}: {shortest}"
        );
        h.end().await;
    }
}

/// `DATE` time columns: the statements write truncated times, then the times cannot be decoded:
/// every acquisition is a store error (nobody runs), the row is left written.
#[tokio::test]
async fn date_columns() {
    for backend in [Backend::Postgres, Backend::MySql] {
        let columns = standard_columns(backend).replace(timestamp(backend), "DATE");
        let Some(h) = Hostile::new(backend, &columns).await else {
            continue;
        };
        for _ in 0..2 {
            let result = h.acquire("dated").await;
            assert_store_error(&result, Operation::Acquire, backend);
        }
        h.end().await;
    }
}

/// NULLs in a nullable table made by hand. A NULL `lock_until` is never taken for expired and
/// its row cannot be inspected (nor the table listed), on every database (SQLite used to grant
/// it); NULL `locked_at`, `locked_by` or `fencing_token` (counted as 0): the lock is taken
/// normally.
#[tokio::test]
async fn null_values_in_a_nullable_table() {
    for backend in Backend::ALL {
        let ts = timestamp(backend);
        let columns = format!(
            "name VARCHAR(64) NOT NULL PRIMARY KEY, lock_until {ts}, locked_at {ts}, \
             locked_by VARCHAR(255), fencing_token BIGINT, last_tick BIGINT"
        );
        let Some(h) = Hostile::new(backend, &columns).await else {
            continue;
        };
        h.exec(
            "INSERT INTO {t} (name, lock_until, locked_at, locked_by, fencing_token) VALUES \
             ('null-until', NULL, '2020-01-01 00:00:00', 'x', 1), \
             ('null-at', '2020-01-01 00:00:00', NULL, 'x', 1), \
             ('null-holder', '2020-01-01 00:00:00', '2020-01-01 00:00:00', NULL, 1), \
             ('null-token', '2020-01-01 00:00:00', '2020-01-01 00:00:00', 'x', NULL)",
        )
        .await
        .unwrap();
        let until = h.acquire("null-until").await;
        let state = h.store.lock_record("null-until").await;
        // Never granted on a NULL end, and inspection says the row is unreadable.
        assert!(until.unwrap().is_none(), "{backend}: never granted");
        assert_store_error(&state, Operation::Read, backend);
        let list = h.store.list_locks().await;
        assert_store_error(&list, Operation::Read, backend);
        for (name, before) in [("null-at", 1), ("null-holder", 1), ("null-token", 0)] {
            let lease = h
                .acquire(name)
                .await
                .unwrap()
                .unwrap_or_else(|| panic!("{backend}: {name}"));
            assert!(lease.fencing_token() > before, "{backend}: {name}");
        }
        h.end().await;
    }
}

/// Times outside what the driver can represent. MariaDB's zero date: inspection is a store
/// error, acquisition takes the lock (the time is past). SQLite's unreadable times: inspection
/// is a store error, and the lock is never granted on a time nobody can read (held, as a
/// corrupt Redis hash is never granted either). PostgreSQL `-infinity` is past: the lock is
/// taken; `infinity` is held forever.
#[tokio::test]
async fn times_out_of_range() {
    for backend in Backend::ALL {
        let Some(h) = Hostile::standard(backend).await else {
            continue;
        };
        let (past, unreadable) = match backend {
            Backend::Postgres => ("'-infinity'", None),
            Backend::MySql => ("'0000-00-00 00:00:00'", Some("'0000-00-00 00:00:00'")),
            Backend::Sqlite => ("'2000-01-01 00:00:00'", Some("'99999-01-01 00:00:00'")),
            Backend::Redis | Backend::RedLock | Backend::Etcd => unreachable!("SQL tables only"),
        };
        h.exec(&format!(
            "INSERT INTO {{t}} (name, lock_until, locked_at, locked_by, fencing_token) \
             VALUES ('past', {past}, {past}, 'x', 1)"
        ))
        .await
        .unwrap();
        if let Some(time) = unreadable {
            h.exec(&format!(
                "INSERT INTO {{t}} (name, lock_until, locked_at, locked_by, fencing_token) \
                 VALUES ('odd', {time}, {time}, 'x', 1)"
            ))
            .await
            .unwrap();
            let state = h.store.lock_record("odd").await;
            assert_store_error(&state, Operation::Read, backend);
            if backend == Backend::Sqlite {
                assert!(
                    h.acquire("odd").await.unwrap().is_none(),
                    "granted on a time SQLite cannot read"
                );
            }
        }
        assert!(
            h.acquire("past")
                .await
                .unwrap()
                .expect("past: free")
                .fencing_token()
                > 1
        );
        if backend == Backend::Postgres {
            h.exec(
                "INSERT INTO {t} (name, lock_until, locked_at, locked_by, fencing_token) \
                 VALUES ('forever', 'infinity', '2020-01-01 00:00:00', 'x', 1)",
            )
            .await
            .unwrap();
            assert!(h.acquire("forever").await.unwrap().is_none());
            h.exec("DELETE FROM {t} WHERE name = 'forever'")
                .await
                .unwrap();
        }
        h.end().await;
    }
}

/// Rows whose times PostgreSQL holds but chrono cannot (`infinity`, years past 262143) made
/// sqlx-postgres panic while decoding them ("`NaiveDateTime + TimeDelta` overflowed") inside
/// `lock_state` and `list_locks`. Inspection now shows such times clamped to year 9999.
#[tokio::test]
async fn postgres_inspection_of_unrepresentable_times_does_not_panic() {
    let Some(h) = Hostile::standard(Backend::Postgres).await else {
        return;
    };
    for time in ["infinity", "294276-01-01 00:00:00"] {
        h.exec(&format!(
            "INSERT INTO {{t}} (name, lock_until, locked_at, locked_by, fencing_token) \
             VALUES ('far', '{time}', '2020-01-01 00:00:00', 'x', 1)"
        ))
        .await
        .unwrap();
        let store = h.store.clone();
        let state = tokio::spawn(async move { store.lock_record("far").await }).await;
        assert!(
            !state.as_ref().is_err_and(|e| e.is_panic()),
            "lock_state panicked on {time}"
        );
        let store = h.store.clone();
        let list = tokio::spawn(async move { store.list_locks().await }).await;
        assert!(
            !list.as_ref().is_err_and(|e| e.is_panic()),
            "list_locks panicked on {time}"
        );
        // Shown clamped to the last representable instant, and held.
        let row = state.unwrap().expect("no store error").expect("the row");
        assert!(row.held, "{time}: a lock until {time} is held");
        let until: chrono::DateTime<chrono::Utc> = row.lock_until.into();
        assert_eq!(until.format("%Y-%m-%d").to_string(), "9999-12-31", "{time}");
        assert!(
            list.unwrap()
                .expect("no store error")
                .iter()
                .any(|r| r.name == "far")
        );
        h.exec("DELETE FROM {t} WHERE name = 'far'").await.unwrap();
    }
    h.end().await;
}

/// A database user that may only read the table, and one that may read and write rows but not
/// change the schema (the usual application user). Read-only: every lock operation is a store
/// error (the job does not run) and inspection works. Rows only: locks work, but
/// `create_schema` fails: the lock table is there, its run table is not. SQLite: a database
/// file opened read-only.
#[tokio::test]
async fn users_without_write_or_schema_rights() {
    for backend in Backend::ALL {
        let Some(h) = Hostile::standard(backend).await else {
            continue;
        };
        for (rights, can_write) in [("SELECT", false), ("SELECT, INSERT, UPDATE", true)] {
            if backend == Backend::Sqlite && can_write {
                continue;
            }
            let user = format!("harness_{}_{}", std::process::id(), u8::from(can_write));
            let url = match backend {
                Backend::Postgres => {
                    h.exec(&format!("CREATE ROLE {user} LOGIN")).await.unwrap();
                    h.exec(&format!("GRANT {rights} ON {{t}} TO {user}"))
                        .await
                        .unwrap();
                    with_user(&h.run.url, &user)
                }
                Backend::MySql => {
                    h.exec(&format!("CREATE USER '{user}'@'%'")).await.unwrap();
                    h.exec(&format!("GRANT {rights} ON {{t}} TO '{user}'@'%'"))
                        .await
                        .unwrap();
                    with_user(&h.run.url, &user)
                }
                Backend::Sqlite => format!("{}?mode=ro", h.run.url),
                Backend::Redis | Backend::RedLock | Backend::Etcd => {
                    unreachable!("SQL tables only")
                }
            };
            let store = Hostile::store_on(&h.run, &h.table, &url, "limited")
                .await
                .unwrap();
            let acquired = store.provider().acquire(&config("limited")).await;
            let executed = LockingTaskExecutor::new(store.provider())
                .execute(&config("limited-2"), async {})
                .await;
            let listed = store.list_locks().await;
            let schema = store.create_schema().await;
            match backend {
                Backend::Postgres => {
                    h.exec(&format!("REVOKE ALL ON {{t}} FROM {user}"))
                        .await
                        .unwrap();
                    h.exec(&format!("DROP ROLE {user}")).await.unwrap();
                }
                Backend::MySql => h.exec(&format!("DROP USER '{user}'@'%'")).await.unwrap(),
                Backend::Sqlite | Backend::Redis | Backend::RedLock | Backend::Etcd => {}
            }
            assert!(listed.is_ok(), "{backend} {rights}: {listed:?}");
            if can_write {
                assert!(
                    acquired.unwrap().is_some() && executed.unwrap().was_executed(),
                    "{backend}"
                );
            } else {
                assert_store_error(&acquired, Operation::Acquire, backend);
                assert_store_error(&executed, Operation::Acquire, backend);
            }
            // The run table beside the lock table is missing: creating it needs rights these
            // users lack (SQLite: a read-only file).
            assert_store_error(
                &schema,
                Operation::Schema,
                format_args!("{backend} {rights}"),
            );
        }
        h.end().await;
    }
}
