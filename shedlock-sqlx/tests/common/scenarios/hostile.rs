//! Hostile input: rows edited by hand, identifiers and lock names that try to be SQL.

use std::time::{Duration, SystemTime};

use shedlock_core::{Error, LockConfiguration, LockLease, LockProvider, Operation};
#[allow(unused_imports)]
use shedlock_core::{LockInspector as _, LockQuery, LockRecord};
use shedlock_sqlx::ColumnNames;

use super::{
    LONG, Provider, ProviderExt, TestDb, attempt, config, drop_table, fresh, is_store_error, row,
    write_row,
};
use crate::common::unique_table;

/// A row whose `lock_until` is far in the future is simply held: no acquisition, no panic.
pub(crate) async fn far_future_row_is_held<D: TestDb>(db: &D) {
    let provider = fresh(db, "a").await;
    let t = provider.table_name();
    let future = "'future', '9999-12-31 23:59:59', '2020-01-01 00:00:00', 'someone'";
    write_row(db, t, future, None).await;
    assert!(attempt(&provider, "future").await.is_none());
    let state = row::<D>(&provider, "future").await;
    assert!(state.held);
    assert_eq!(state.holder, "someone");
    drop_table(db, t).await;
}

/// Rows written the way ShedLock writes them (no token column value) are taken over once
/// expired, and tokens count up from there; a negative token counts as 0.
pub(crate) async fn shedlock_rows_are_taken_over<D: TestDb>(db: &D) {
    let provider = fresh(db, "a").await;
    let t = provider.table_name();
    let java_row = "'java', '2020-01-01 00:00:00', '2020-01-01 00:00:00', 'java-host'";
    write_row(db, t, java_row, None).await;
    let negative = "'negative', '2020-01-01 00:00:00.000', '2020-01-01 00:00:00.000', 'x'";
    write_row(db, t, negative, Some(-5)).await;
    assert_eq!(row::<D>(&provider, "java").await.fencing_token, 0);
    let java = config("java", LONG, Duration::ZERO);
    let first = provider
        .acquire(&java)
        .await
        .unwrap()
        .expect("expired row taken over");
    assert!(first.fencing_token() > 0);
    assert!(provider.release(&first).await.unwrap());
    let second = provider.acquire(&java).await.unwrap().expect("released");
    assert!(second.fencing_token() > first.fencing_token());
    assert_eq!(row::<D>(&provider, "java").await.holder, "a");

    // A negative token reads as 0, as the statements count it.
    assert_eq!(row::<D>(&provider, "negative").await.fencing_token, 0);
    let lease = attempt(&provider, "negative").await.expect("acquired");
    assert!(lease.fencing_token() > 0, "a negative token counts as 0");
    drop_table(db, t).await;
}

/// A token at the column's maximum cannot be incremented: acquisition fails with a store
/// error (no wrap-around, no panic) and leaves the row alone.
pub(crate) async fn exhausted_token_fails_cleanly<D: TestDb>(db: &D) {
    let provider = fresh(db, "a").await;
    let t = provider.table_name();
    let max = "'max', '2020-01-01 00:00:00', '2020-01-01 00:00:00', 'x'";
    write_row(db, t, max, Some(i64::MAX)).await;
    let result = provider.acquire(&config("max", LONG, Duration::ZERO)).await;
    assert!(is_store_error(&result, Operation::Acquire), "{result:?}");
    let state = row::<D>(&provider, "max").await;
    assert_eq!(
        (state.fencing_token, state.held, state.holder.as_str()),
        (i64::MAX as u64, false, "x")
    );
    drop_table(db, t).await;
}

/// A row deleted by hand while providers run is recreated by the next attempt, even when it
/// was held.
pub(crate) async fn deleted_row_is_recreated<D: TestDb>(db: &D) {
    let a = fresh(db, "a").await;
    let b = a.clone_as("b");
    let t = a.table_name();
    let c = config("deleted", LONG, Duration::ZERO);
    let lease = a.acquire(&c).await.unwrap().expect("acquired");
    assert!(a.release(&lease).await.unwrap());
    db.execute(&format!("DELETE FROM {t}")).await;
    let lease = a.acquire(&c).await.unwrap().expect("row recreated");
    db.execute(&format!("DELETE FROM {t}")).await;
    assert!(!a.release(&lease).await.unwrap(), "nothing left to release");
    assert!(
        b.acquire(&c).await.unwrap().is_some(),
        "held row deleted: free again"
    );
    assert_eq!(row::<D>(&a, "deleted").await.holder, "b");
    drop_table(db, t).await;
}

/// Operations on a table that does not exist fail with a store error that says so.
pub(crate) async fn missing_table_is_a_clear_error<D: TestDb>(db: &D) {
    let table = unique_table("shedlock_missing");
    let provider = db.build(&table, ColumnNames::default(), "a").unwrap();
    let c = config("missing", LONG, Duration::ZERO);
    let result = provider.acquire(&c).await;
    assert!(is_store_error(&result, Operation::Acquire), "{result:?}");
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains(&format!("lock table `{table}` does not exist")),
        "{message}"
    );
    let now = SystemTime::now();
    let lease = LockLease::new(&c, "a", 1, now, now + LONG);
    assert!(is_store_error(
        &provider.release(&lease).await,
        Operation::Release
    ));
    assert!(is_store_error(
        &provider.extend(&lease, LONG, Duration::ZERO).await,
        Operation::Extend
    ));
    assert!(is_store_error(
        &provider.lock_record("missing").await,
        Operation::Read
    ));
    assert!(is_store_error(
        &provider.list_locks(&LockQuery::all()).await,
        Operation::Read
    ));
}

/// Table and column names that are not plain identifiers never reach SQL.
pub(crate) async fn hostile_identifiers_are_rejected<D: TestDb>(db: &D) {
    let field = |result: Result<Provider<D>, Error>| match result {
        Err(Error::InvalidConfig { field, .. }) => field,
        Err(other) => panic!("expected InvalidConfig, got {other}"),
        Ok(_) => panic!("expected InvalidConfig, got a provider"),
    };
    for table in [
        "shedlock; DROP TABLE users",
        "shedlock--",
        "shedlock/*",
        "\"shedlock\"",
        "`shedlock`",
        "'shedlock'",
        "a.b.c",
        "1shedlock",
        "shed lock",
        "",
    ] {
        assert_eq!(
            field(db.build(table, ColumnNames::default(), "a")),
            "table",
            "{table:?}"
        );
    }
    let columns = ColumnNames::default().locked_by("locked_by = 'x', name");
    assert_eq!(
        field(db.build("shedlock", columns, "a")),
        "columns.locked_by"
    );
    assert_eq!(
        field(db.build("shedlock", ColumnNames::default(), "a\0b")),
        "holder"
    );
}

/// Lock names that look like SQL are bound parameters: stored verbatim, no effect on other rows.
pub(crate) async fn sql_looking_names_are_plain_names<D: TestDb>(db: &D) {
    let victim = fresh(db, "victim").await;
    let attacker = victim.clone_as("attacker");
    let t = victim.table_name();
    let guarded = attempt(&victim, "guarded").await.unwrap();
    let names = [
        format!("x'; DELETE FROM {t}; --"),
        format!("x\"; UPDATE {t} SET name = 'p'; --"),
        "' OR '1'='1".to_owned(),
        "guarded' --".to_owned(),
        "%".to_owned(),
        "_".to_owned(),
        "back\\slash".to_owned(),
    ];
    for name in &names {
        let lease = attempt(&attacker, name)
            .await
            .unwrap_or_else(|| panic!("{name:?} not acquired"));
        assert_eq!(lease.name(), name);
    }
    let rows = victim.list_locks(&LockQuery::all()).await.unwrap();
    assert_eq!(rows.len(), names.len() + 1);
    for name in &names {
        assert!(
            rows.iter().any(|r| &r.name == name && r.held),
            "{name:?} missing"
        );
    }
    let guarded_row = row::<D>(&victim, "guarded").await;
    assert!(guarded_row.held && guarded_row.holder == "victim");
    assert_eq!(guarded_row.fencing_token, guarded.fencing_token());
    drop_table(db, t).await;
}

/// A name longer than the lock model allows is refused before any SQL; a name longer than a
/// narrower name column is refused by the database (or, in SQLite, stored whole).
pub(crate) async fn names_longer_than_the_column_fail_clearly<D: TestDb>(db: &D) {
    match LockConfiguration::new("n".repeat(65), LONG, Duration::ZERO) {
        Err(Error::InvalidConfig { field: "name", .. }) => {}
        other => panic!("65-byte name: {other:?}"),
    }
    let table = unique_table("shedlock_narrow");
    db.execute(&format!(
        "CREATE TABLE {table} (name VARCHAR(16) NOT NULL, lock_until {ts} NOT NULL, \
         locked_at {ts} NOT NULL, locked_by VARCHAR(255) NOT NULL, \
         fencing_token BIGINT NOT NULL DEFAULT 0, last_tick BIGINT, PRIMARY KEY (name))",
        ts = D::TIMESTAMP
    ))
    .await;
    let provider = db.build(&table, ColumnNames::default(), "a").unwrap();
    let long = config(&"n".repeat(40), LONG, Duration::ZERO);
    let result = provider.acquire(&long).await;
    if D::ENFORCES_VARCHAR {
        assert!(is_store_error(&result, Operation::Acquire), "{result:?}");
        assert!(attempt(&provider, "short").await.is_some());
    } else {
        assert!(result.unwrap().is_some(), "SQLite keeps the whole name");
        assert_eq!(row::<D>(&provider, long.name()).await.name, long.name());
    }
    let longest = config(&"m".repeat(64), LONG, Duration::ZERO);
    let fresh = fresh(db, "a").await;
    assert!(
        fresh.acquire(&longest).await.unwrap().is_some(),
        "64 bytes fit the default table"
    );
    drop_table(db, &table).await;
    drop_table(db, fresh.table_name()).await;
}
