//! The table itself: creation and upgrade, custom names, inspection, database time, and the
//! statements each operation costs.

use std::time::{Duration, SystemTime};

use shedlock_core::{LockConfiguration, LockProvider, Operation, Tick};
#[allow(unused_imports)]
use shedlock_core::{LockInspector as _, LockQuery, LockRecord};
use shedlock_sqlx::ColumnNames;

use super::{
    LONG, ProviderExt, TestDb, attempt, config, drop_table, fresh, is_store_error, row, write_row,
};
use crate::common::{millis_between, statements, unique_table};

/// Lease times are the database's: `lock_until - locked_at` is exactly the lease, `locked_at` is
/// the database's clock, and release sets `lock_until` to exactly `locked_at + lock_at_least_for`.
pub(crate) async fn lease_times_are_database_times<D: TestDb>(db: &D) {
    let provider = fresh(db, "timer").await;
    let before = db.now().await;
    let lease = provider
        .acquire(&config(
            "times",
            Duration::from_millis(12_345),
            Duration::from_millis(4_321),
        ))
        .await
        .unwrap()
        .expect("acquired");
    let after = db.now().await;
    assert_eq!(
        millis_between(lease.locked_at(), lease.lock_until()),
        12_345
    );
    assert!(
        millis_between(before, lease.locked_at()) >= -1
            && millis_between(lease.locked_at(), after) >= -1,
        "locked_at {:?} is not between the database's clock readings {before:?} and {after:?}",
        lease.locked_at()
    );
    let extended = provider
        .extend(&lease, Duration::from_millis(20_000), Duration::ZERO)
        .await
        .unwrap()
        .expect("extended");
    let after_extend = db.now().await;
    let until = millis_between(after_extend, extended.lock_until());
    assert!(
        (19_000..=20_001).contains(&until),
        "extended lock_until is now + {until} ms"
    );
    assert!(provider.release(&lease).await.unwrap());
    let released = row::<D>(&provider, "times").await;
    assert_eq!(
        millis_between(released.locked_at, released.lock_until),
        4_321
    );
    assert!(released.held, "lock_at_least_for keeps it held");
    drop_table(db, provider.table_name()).await;
}

/// A table created by ShedLock (no `fencing_token`) fails with a hint until `create_schema`
/// adds the column; `create_schema` is idempotent and safe to run concurrently.
pub(crate) async fn create_schema_upgrades_shedlock_tables<D: TestDb>(db: &D) {
    let table = unique_table("shedlock_java");
    db.execute(&format!(
        "CREATE TABLE {table} (name VARCHAR(64) NOT NULL, lock_until {ts} NOT NULL, \
         locked_at {ts} NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))",
        ts = D::TIMESTAMP
    ))
    .await;
    let java = "'java', '2020-01-01 00:00:00', '2020-01-01 00:00:00', 'java-host'";
    write_row(db, &table, java, None).await;
    let provider = db.build(&table, ColumnNames::default(), "a").unwrap();
    let c = config("java", LONG, Duration::ZERO);
    let result = provider.acquire(&c).await;
    assert!(is_store_error(&result, Operation::Acquire), "{result:?}");
    let message = result.unwrap_err().to_string();
    assert!(message.contains("lacks a column"), "{message}");

    let runs: Vec<_> = (0..4)
        .map(|_| {
            let provider = provider.clone();
            tokio::spawn(async move { provider.create_schema().await })
        })
        .collect();
    for run in runs {
        run.await.unwrap().expect("concurrent create_schema");
    }
    provider.create_schema().await.expect("idempotent");
    assert_eq!(row::<D>(&provider, "java").await.fencing_token, 0);
    let lease = provider.acquire(&c).await.unwrap().expect("acquired");
    assert!(lease.fencing_token() > 0);
    drop_table(db, &table).await;
}

/// `config` claiming the tick of now.
fn this_tick(config: LockConfiguration) -> LockConfiguration {
    config.for_tick(Tick::new(SystemTime::now()))
}

/// A table made by the version before tick claims (`fencing_token`, no `last_tick`) fails
/// acquisitions, naming the column and how to add it, until `create_schema` adds it. Its rows,
/// and those Java ShedLock inserts afterwards (no last tick), are then granted a tick, once.
pub(crate) async fn create_schema_adds_the_last_tick_column<D: TestDb>(db: &D) {
    let table = unique_table("shedlock_before_ticks");
    db.execute(&format!(
        "CREATE TABLE {table} (name VARCHAR(64) NOT NULL, lock_until {ts} NOT NULL, \
         locked_at {ts} NOT NULL, locked_by VARCHAR(255) NOT NULL, \
         fencing_token BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (name))",
        ts = D::TIMESTAMP
    ))
    .await;
    let expired = "'2020-01-01 00:00:00', '2020-01-01 00:00:00'";
    write_row(
        db,
        &table,
        &format!("'old', {expired}, 'old-host'"),
        Some(7),
    )
    .await;
    let provider = db.build(&table, ColumnNames::default(), "a").unwrap();
    let result = provider
        .acquire(&this_tick(config("old", LONG, Duration::ZERO)))
        .await;
    assert!(is_store_error(&result, Operation::Acquire), "{result:?}");
    let message = result.unwrap_err().to_string();
    let fix = format!(
        "lacks a column, `last_tick`: `create_schema()` adds it, \
         or `ALTER TABLE {table} ADD COLUMN last_tick BIGINT`"
    );
    assert!(message.contains(&fix), "{message}");
    // A batch fails as a whole: each lock gets an error of its own, naming it and the fix.
    let names = ["old", "new-a", "new-b"];
    let batch: Vec<_> = names
        .iter()
        .map(|name| this_tick(config(name, LONG, Duration::ZERO)))
        .collect();
    for (name, answer) in names.iter().zip(provider.acquire_many(&batch).await) {
        match answer {
            Err(shedlock_core::Error::Store {
                operation: Operation::Acquire,
                lock_name,
                source,
            }) => {
                assert_eq!(lock_name, *name);
                assert!(source.to_string().contains(&fix), "{name}: {source}");
            }
            other => panic!("{name}: {other:?}"),
        }
    }

    provider.create_schema().await.expect("add the column");
    assert_eq!(provider.check_schema().await.unwrap(), []);
    write_row(db, &table, &format!("'java', {expired}, 'java-host'"), None).await;
    for name in ["old", "java"] {
        let c = config(name, LONG, Duration::ZERO);
        let claim = this_tick(c.clone());
        let lease = provider
            .acquire(&claim)
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{name}: a row without a last tick refused a tick"));
        assert!(lease.fencing_token() > 7);
        assert!(provider.release(&lease).await.unwrap());
        let b = provider.clone_as("b");
        assert!(
            b.acquire(&claim).await.unwrap().is_none(),
            "{name}: a tick granted twice"
        );
        let by_hand = b.acquire(&c).await.unwrap().expect("no tick, no check");
        assert!(b.release(&by_hand).await.unwrap());
    }
    drop_table(db, &table).await;
}

/// Custom column names and a schema-qualified table work end to end.
pub(crate) async fn custom_columns_and_schema_work<D: TestDb>(db: &D) {
    let table = format!("{}.{}", db.schema().await, unique_table("shedlock_custom"));
    let columns = ColumnNames::default()
        .name("lock_name")
        .lock_until("expires")
        .locked_at("since")
        .locked_by("owner")
        .fencing_token("token")
        .last_tick("tick_ms");
    let a = db.build(&table, columns.clone(), "a").unwrap();
    let b = db.build(&table, columns, "b").unwrap();
    a.create_schema().await.expect("create schema");
    let c = config("custom", LONG, Duration::ZERO);
    let lease = a.acquire(&c).await.unwrap().expect("acquired");
    assert!(b.acquire(&c).await.unwrap().is_none());
    let lease = a
        .extend(&lease, LONG, Duration::ZERO)
        .await
        .unwrap()
        .expect("extended");
    assert!(a.release(&lease).await.unwrap());
    let tick = this_tick(c.clone());
    let taken = b.acquire(&tick).await.unwrap().expect("released");
    assert!(taken.fencing_token() > lease.fencing_token());
    let rows = a.list_locks(&LockQuery::all()).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert!(
        rows[0].to_string().starts_with("custom: held by b until "),
        "{}",
        rows[0]
    );
    assert!(b.release(&taken).await.unwrap());
    assert!(
        a.acquire(&tick).await.unwrap().is_none(),
        "a tick granted twice"
    );
    drop_table(db, &table).await;
}

/// `lock_state` and `list_locks` report holder, token and whether the lease runs.
pub(crate) async fn inspection_reports_rows<D: TestDb>(db: &D) {
    let provider = fresh(db, "inspector").await;
    assert!(
        provider
            .list_locks(&LockQuery::all())
            .await
            .unwrap()
            .is_empty()
    );
    assert!(provider.lock_record("none").await.unwrap().is_none());
    let held = attempt(&provider, "b-held").await.unwrap();
    let done = attempt(&provider, "a-done").await.unwrap();
    assert!(provider.release(&done).await.unwrap());
    let rows = provider.list_locks(&LockQuery::all()).await.unwrap();
    let summary: Vec<_> = rows
        .iter()
        .map(|r| (r.name.as_str(), r.holder.as_str(), r.fencing_token, r.held))
        .collect();
    assert_eq!(
        summary,
        [
            ("a-done", "inspector", done.fencing_token(), false),
            ("b-held", "inspector", held.fencing_token(), true)
        ]
    );
    assert_eq!(rows[1].lock_until, held.lock_until());
    assert_eq!(rows[1].locked_at, held.locked_at());
    assert!(
        rows[0]
            .to_string()
            .starts_with("a-done: last held by inspector until ")
    );
    drop_table(db, provider.table_name()).await;
}

/// Each operation costs the statements the dialect's documentation promises, no more.
pub(crate) async fn statements_per_operation<D: TestDb>(db: &D) {
    statements::record();
    let a = fresh(db, "a").await;
    let b = a.clone_as("b");
    let t = a.table_name().to_owned();
    let c = config("counted", LONG, Duration::ZERO);
    let mut before = statements::executed_on(&t);
    let mut cost = || {
        let now = statements::executed_on(&t);
        std::mem::replace(&mut before, now).abs_diff(now)
    };
    let first = a.acquire(&c).await.unwrap().expect("first use");
    let first_use = cost();
    assert!(b.acquire(&c).await.unwrap().is_none());
    let held = cost();
    assert!(a.release(&first).await.unwrap());
    let release = cost();
    let lease = b.acquire(&c).await.unwrap().expect("free");
    let free = cost();
    assert!(
        b.extend(&lease, LONG, Duration::ZERO)
            .await
            .unwrap()
            .is_some()
    );
    let extend = cost();
    assert_eq!(
        [first_use, free, held, release, extend],
        D::STATEMENTS,
        "statements for [first use, free, held, release, extend]"
    );
    drop_table(db, &t).await;
}

/// A batch of 100 locks costs the statements `BATCH_STATEMENTS` says, whatever state its
/// locks are in: the figure the crate's documentation gives per dialect.
pub(crate) async fn statements_per_batch<D: TestDb>(db: &D) {
    statements::record();
    let a = fresh(db, "a").await;
    let b = a.clone_as("b");
    let t = a.table_name().to_owned();
    let configs: Vec<LockConfiguration> = (0..100)
        .map(|i| config(&format!("batch-{i:03}"), LONG, Duration::ZERO))
        .collect();
    let mut before = statements::executed_on(&t);
    let mut cost = || {
        let now = statements::executed_on(&t);
        std::mem::replace(&mut before, now).abs_diff(now)
    };
    let granted = |answers: Vec<Result<Option<shedlock_core::LockLease>, shedlock_core::Error>>| {
        answers
            .into_iter()
            .filter_map(|answer| answer.expect("no store error"))
            .collect::<Vec<_>>()
    };
    let leases = granted(a.acquire_many(&configs).await);
    let first_use = cost();
    assert_eq!(leases.len(), 100, "every lock is free on first use");
    assert!(granted(b.acquire_many(&configs).await).is_empty());
    let held = cost();
    for lease in &leases {
        assert!(a.release(lease).await.unwrap());
    }
    cost();
    assert_eq!(granted(b.acquire_many(&configs).await).len(), 100);
    let free = cost();
    assert_eq!(
        [first_use, held, free],
        D::BATCH_STATEMENTS,
        "statements for a batch of 100 locks [first use, held, free]"
    );
    drop_table(db, &t).await;
}

/// What a command line offers operators: release a lease named by holder and token (and so,
/// after reading the row, force a lock free), never touching a lease taken in between.
pub(crate) async fn operators_release_by_holder_and_token<D: TestDb>(db: &D) {
    let provider = fresh(db, "worker").await;
    let c = config("stuck", LONG, Duration::from_secs(60));
    let lease = provider.acquire(&c).await.unwrap().expect("free");
    let operator = provider.clone_as("operator");
    assert!(operator.acquire(&c).await.unwrap().is_none(), "held");

    let seen = row::<D>(&operator, "stuck").await;
    let (mut other_token, mut other_holder) = (seen.clone(), seen.clone());
    other_token.fencing_token += 1;
    other_holder.holder = "someone-else".into();
    let wrong_token = operator.release_lock(&other_token).await.unwrap();
    let wrong_holder = operator.release_lock(&other_holder).await.unwrap();
    assert!(!wrong_token && !wrong_holder, "released another lease");
    let released = operator.release_lock(&seen).await.unwrap();
    assert!(released, "not released");
    // Free now, whatever its lock_at_least_for; the holder's own release finds nothing.
    assert!(!row::<D>(&operator, "stuck").await.held);
    assert!(!provider.release(&lease).await.unwrap());
    let next = operator.acquire(&c).await.unwrap().expect("free again");
    assert!(next.fencing_token() > lease.fencing_token());
    // Holders are matched as the row holds them, whatever another program wrote: a holder no
    // provider of ours would accept (here with an escape sequence) can still be released.
    db.execute(&format!(
        "UPDATE {} SET locked_by = 'odd\x1b[2Jholder' WHERE name = 'stuck'",
        provider.table_name()
    ))
    .await;
    let odd = operator.acquire(&c).await.unwrap().is_none();
    let seen = row::<D>(&operator, "stuck").await;
    assert!(odd && seen.holder.contains("odd"));
    assert!(operator.release_lock(&seen).await.unwrap());
    let mut nobody = seen.clone();
    (nobody.holder, nobody.fencing_token) = (String::new(), 1);
    assert!(!operator.release_lock(&nobody).await.unwrap());
    drop_table(db, provider.table_name()).await;
}
