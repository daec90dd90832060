//! What operators and tools read about a table: the database clock, how long leases have
//! left, whether the table fits the provider, and whether this user may use it.

use std::time::Duration;

use shedlock_core::LockProvider;
#[allow(unused_imports)]
use shedlock_core::{LockInspector as _, LockQuery, LockRecord};
use shedlock_sqlx::{ColumnNames, SchemaIssue};

use super::{LONG, ProviderExt, TestDb, attempt, drop_table, fresh, row};
use crate::common::{millis_between, unique_table};

/// Rows carry the database clock they were read at, and `remaining()` counts from it;
/// `database_time()` reads the same clock.
pub(crate) async fn inspection_reads_the_database_clock<D: TestDb>(db: &D) {
    let provider = fresh(db, "clock").await;
    let lease = attempt(&provider, "running").await.expect("acquired");
    let done = attempt(&provider, "done").await.expect("acquired");
    assert!(provider.release(&done).await.unwrap());

    let before = db.now().await;
    let running = row::<D>(&provider, "running").await;
    let now = provider.store_time().await.expect("database time");
    let after = db.now().await;
    let within = |t| millis_between(before, t) >= -1 && millis_between(t, after) >= -1;
    assert!(
        within(running.read_at),
        "read_at {:?} outside {before:?}..{after:?}",
        running.read_at
    );
    assert!(
        within(now),
        "database_time {now:?} outside {before:?}..{after:?}"
    );
    assert_eq!(running.lock_until, lease.lock_until());
    assert_eq!(
        running.remaining(),
        running.lock_until.duration_since(running.read_at).unwrap()
    );
    assert!(running.remaining() <= LONG);
    assert_eq!(
        row::<D>(&provider, "done").await.remaining(),
        Duration::ZERO
    );
    drop_table(db, provider.table_name()).await;
}

/// `check_schema` accepts the table `create_schema` makes and names what else is wrong:
/// no table, a ShedLock table without `fencing_token`, a column of the wrong type.
pub(crate) async fn check_schema_names_what_does_not_fit<D: TestDb>(db: &D) {
    let provider = fresh(db, "checker").await;
    assert_eq!(provider.check_schema().await.unwrap(), []);
    // The run table is checked too: a lock table without it is named as missing.
    db.execute(&format!("DROP TABLE {}", provider.runs_table()))
        .await;
    assert_eq!(
        provider.check_schema().await.unwrap(),
        [SchemaIssue::MissingTable {
            table: provider.runs_table().to_owned()
        }]
    );
    drop_table(db, provider.table_name()).await;

    let missing = unique_table("shedlock_absent");
    let absent = db.build(&missing, ColumnNames::default(), "a").unwrap();
    assert_eq!(
        absent.check_schema().await.unwrap(),
        [
            SchemaIssue::MissingTable {
                table: missing.clone()
            },
            SchemaIssue::MissingTable {
                table: format!("{missing}_runs")
            }
        ]
    );

    let table = unique_table("shedlock_java");
    let java = |token: &str| {
        format!(
            "CREATE TABLE {table} (name VARCHAR(64) NOT NULL, lock_until {ts} NOT NULL, \
             locked_at {ts} NOT NULL, locked_by VARCHAR(255) NOT NULL{token}, \
             PRIMARY KEY (name))",
            ts = D::TIMESTAMP
        )
    };
    let provider = db.build(&table, ColumnNames::default(), "a").unwrap();
    let lock_issues = |issues: Vec<SchemaIssue>| {
        issues
            .into_iter()
            .filter(|issue| !matches!(issue, SchemaIssue::MissingTable { table } if table.ends_with("_runs")))
            .collect::<Vec<_>>()
    };
    db.execute(&java("")).await;
    let issues = lock_issues(provider.check_schema().await.unwrap());
    assert!(
        matches!(&issues[..], [
            SchemaIssue::MissingColumn { column: token, .. },
            SchemaIssue::MissingColumn { column: tick, .. },
        ] if token == "fencing_token" && tick == "last_tick"),
        "{issues:?}"
    );
    provider.create_schema().await.expect("add the columns");
    assert_eq!(lock_issues(provider.check_schema().await.unwrap()), []);
    drop_table(db, &table).await;

    db.execute(&java(
        ", fencing_token VARCHAR(20) NOT NULL, last_tick BIGINT",
    ))
    .await;
    let issues = lock_issues(provider.check_schema().await.unwrap());
    assert!(
        matches!(&issues[..], [SchemaIssue::WrongType { column, found, .. }]
            if column == "fencing_token" && found.contains("char")),
        "{issues:?}"
    );
    assert!(
        issues[0]
            .to_string()
            .starts_with("column `fencing_token` is "),
        "{}",
        issues[0]
    );
    drop_table(db, &table).await;
    db.execute(&java(
        ", fencing_token BIGINT NOT NULL DEFAULT 0, last_tick VARCHAR(20)",
    ))
    .await;
    let issues = lock_issues(provider.check_schema().await.unwrap());
    assert!(
        matches!(&issues[..], [SchemaIssue::WrongType { column, .. }] if column == "last_tick"),
        "{issues:?}"
    );
    drop_table(db, &table).await;

    // Without a key on the name, two first acquisitions could both insert a row.
    db.execute(&format!(
        "CREATE TABLE {table} (name VARCHAR(64) NOT NULL, lock_until {ts} NOT NULL, \
         locked_at {ts} NOT NULL, locked_by VARCHAR(255) NOT NULL, \
         fencing_token BIGINT NOT NULL DEFAULT 0, last_tick BIGINT)",
        ts = D::TIMESTAMP
    ))
    .await;
    assert_eq!(
        lock_issues(provider.check_schema().await.unwrap()),
        [SchemaIssue::NotUnique {
            column: "name".into()
        }]
    );
    db.execute(&format!(
        "CREATE UNIQUE INDEX {table}_by_name ON {table} (name)"
    ))
    .await;
    assert_eq!(lock_issues(provider.check_schema().await.unwrap()), []);
    drop_table(db, &table).await;
}

/// `check_access` runs the lock statements and rolls them back: no row is left behind.
pub(crate) async fn check_access_leaves_no_trace<D: TestDb>(db: &D) {
    let provider = fresh(db, "prober").await;
    provider.check_access().await.expect("access");
    provider.check_access().await.expect("access, again");
    assert_eq!(provider.list_locks(&LockQuery::all()).await.unwrap(), []);
    drop_table(db, provider.table_name()).await;

    let absent = db
        .build(
            &unique_table("shedlock_absent"),
            ColumnNames::default(),
            "a",
        )
        .unwrap();
    let error = absent.check_access().await.unwrap_err().to_string();
    assert!(error.contains("does not exist"), "{error}");
}
