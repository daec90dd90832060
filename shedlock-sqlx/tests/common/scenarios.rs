//! Cases every SQL provider must pass beyond the conformance suite: hostile rows, hostile
//! names, schema handling and database time. Each case works on a table of its own.

use std::time::{Duration, SystemTime};

use shedlock_core::{Error, LockConfiguration, LockLease, LockProvider, Operation};
use shedlock_sqlx::{ColumnNames, LockRow};

use super::{millis_between, unique_table};

/// One database and its provider type, as the cases need them.
#[shedlock_core::async_trait]
pub(crate) trait TestDb: Send + Sync + Sized + 'static {
    /// The provider under test.
    type Provider: LockProvider + Clone + ProviderExt;
    /// The column type of `lock_until`/`locked_at` in hand-made tables.
    const TIMESTAMP: &'static str;
    /// Whether `VARCHAR(n)` refuses longer values (SQLite does not).
    const ENFORCES_VARCHAR: bool;

    fn build(
        &self,
        table: &str,
        columns: ColumnNames,
        holder: &str,
    ) -> Result<Self::Provider, Error>;
    async fn create_schema(provider: &Self::Provider) -> Result<(), Error>;
    async fn lock_state(provider: &Self::Provider, name: &str) -> Result<Option<LockRow>, Error>;
    async fn list_locks(provider: &Self::Provider) -> Result<Vec<LockRow>, Error>;
    /// Runs SQL written by the test (literals only).
    async fn execute(&self, sql: &str);
    /// The database clock, read in a statement of its own (UTC).
    async fn now(&self) -> SystemTime;
    /// A schema the connection may qualify tables with.
    async fn schema(&self) -> String;
}

/// A provider on a new table of its own, created with `create_schema`.
async fn fresh<D: TestDb>(db: &D, holder: &str) -> D::Provider {
    let provider = db
        .build(
            &unique_table("shedlock_case"),
            ColumnNames::default(),
            holder,
        )
        .expect("valid configuration");
    D::create_schema(&provider).await.expect("create schema");
    provider
}

async fn drop_table<D: TestDb>(db: &D, table: &str) {
    db.execute(&format!("DROP TABLE IF EXISTS {table}")).await;
}

fn config(name: &str, at_most: Duration, at_least: Duration) -> LockConfiguration {
    LockConfiguration::new(name, at_most, at_least).expect("valid configuration")
}

const LONG: Duration = Duration::from_secs(600);

async fn row<D: TestDb>(provider: &D::Provider, name: &str) -> LockRow {
    D::lock_state(provider, name)
        .await
        .expect("read")
        .unwrap_or_else(|| panic!("no row for {name}"))
}

fn is_store_error(result: &Result<impl std::fmt::Debug, Error>, operation: Operation) -> bool {
    matches!(result, Err(Error::Store { operation: op, .. }) if *op == operation)
}

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

/// A row whose `lock_until` is far in the future is simply held: no acquisition, no panic.
pub(crate) async fn far_future_row_is_held<D: TestDb>(db: &D) {
    let provider = fresh(db, "a").await;
    let t = provider.table_name();
    db.execute(&format!(
        "INSERT INTO {t} (name, lock_until, locked_at, locked_by) \
         VALUES ('future', '9999-12-31 23:59:59', '2020-01-01 00:00:00', 'someone')"
    ))
    .await;
    assert!(
        provider
            .acquire(&config("future", LONG, Duration::ZERO))
            .await
            .unwrap()
            .is_none()
    );
    let state = row::<D>(&provider, "future").await;
    assert!(state.held);
    assert_eq!(state.locked_by, "someone");
    drop_table(db, t).await;
}

/// Rows written the way ShedLock writes them (no token column value) are taken over once
/// expired, and tokens count up from there; negative tokens restart at 1.
pub(crate) async fn shedlock_rows_are_taken_over<D: TestDb>(db: &D) {
    let provider = fresh(db, "a").await;
    let t = provider.table_name();
    db.execute(&format!(
        "INSERT INTO {t} (name, lock_until, locked_at, locked_by) \
         VALUES ('java', '2020-01-01 00:00:00', '2020-01-01 00:00:00', 'java-host')"
    ))
    .await;
    db.execute(&format!(
        "INSERT INTO {t} (name, lock_until, locked_at, locked_by, fencing_token) \
         VALUES ('negative', '2020-01-01 00:00:00.000', '2020-01-01 00:00:00.000', 'x', -5)"
    ))
    .await;
    assert_eq!(row::<D>(&provider, "java").await.fencing_token, 0);
    let java = config("java", LONG, Duration::ZERO);
    let first = provider
        .acquire(&java)
        .await
        .unwrap()
        .expect("expired row taken over");
    assert_eq!(first.fencing_token(), 1);
    assert!(provider.release(&first).await.unwrap());
    let second = provider.acquire(&java).await.unwrap().expect("released");
    assert_eq!(second.fencing_token(), 2);
    assert_eq!(row::<D>(&provider, "java").await.locked_by, "a");

    assert_eq!(row::<D>(&provider, "negative").await.fencing_token, -5);
    let lease = provider
        .acquire(&config("negative", LONG, Duration::ZERO))
        .await
        .unwrap()
        .expect("acquired");
    assert_eq!(lease.fencing_token(), 1, "a negative token counts as 0");
    drop_table(db, t).await;
}

/// A token at the column's maximum cannot be incremented: acquisition fails with a store
/// error (no wrap-around, no panic) and leaves the row alone.
pub(crate) async fn exhausted_token_fails_cleanly<D: TestDb>(db: &D) {
    let provider = fresh(db, "a").await;
    let t = provider.table_name();
    db.execute(&format!(
        "INSERT INTO {t} (name, lock_until, locked_at, locked_by, fencing_token) \
         VALUES ('max', '2020-01-01 00:00:00', '2020-01-01 00:00:00', 'x', 9223372036854775807)"
    ))
    .await;
    let result = provider.acquire(&config("max", LONG, Duration::ZERO)).await;
    assert!(is_store_error(&result, Operation::Acquire), "{result:?}");
    let state = row::<D>(&provider, "max").await;
    assert_eq!(
        (state.fencing_token, state.held, state.locked_by.as_str()),
        (i64::MAX, false, "x")
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
    assert_eq!(row::<D>(&a, "deleted").await.locked_by, "b");
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
        &D::lock_state(&provider, "missing").await,
        Operation::Read
    ));
    assert!(is_store_error(
        &D::list_locks(&provider).await,
        Operation::Read
    ));
}

/// Table and column names that are not plain identifiers never reach SQL.
pub(crate) async fn hostile_identifiers_are_rejected<D: TestDb>(db: &D) {
    let field = |result: Result<D::Provider, Error>| match result {
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
    let guarded = victim
        .acquire(&config("guarded", LONG, Duration::ZERO))
        .await
        .unwrap()
        .unwrap();
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
        let lease = attacker
            .acquire(&config(name, LONG, Duration::ZERO))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{name:?} not acquired"));
        assert_eq!(lease.name(), name);
    }
    let rows = D::list_locks(&victim).await.unwrap();
    assert_eq!(rows.len(), names.len() + 1);
    for name in &names {
        assert!(
            rows.iter().any(|r| &r.name == name && r.held),
            "{name:?} missing"
        );
    }
    let guarded_row = row::<D>(&victim, "guarded").await;
    assert!(guarded_row.held && guarded_row.locked_by == "victim");
    assert_eq!(guarded_row.fencing_token, guarded.fencing_token() as i64);
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
         fencing_token BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (name))",
        ts = D::TIMESTAMP
    ))
    .await;
    let provider = db.build(&table, ColumnNames::default(), "a").unwrap();
    let long = config(&"n".repeat(40), LONG, Duration::ZERO);
    let result = provider.acquire(&long).await;
    if D::ENFORCES_VARCHAR {
        assert!(is_store_error(&result, Operation::Acquire), "{result:?}");
        assert!(
            provider
                .acquire(&config("short", LONG, Duration::ZERO))
                .await
                .unwrap()
                .is_some()
        );
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
    db.execute(&format!(
        "INSERT INTO {table} (name, lock_until, locked_at, locked_by) \
         VALUES ('java', '2020-01-01 00:00:00', '2020-01-01 00:00:00', 'java-host')"
    ))
    .await;
    let provider = db.build(&table, ColumnNames::default(), "a").unwrap();
    let c = config("java", LONG, Duration::ZERO);
    let result = provider.acquire(&c).await;
    assert!(is_store_error(&result, Operation::Acquire), "{result:?}");
    let message = result.unwrap_err().to_string();
    assert!(message.contains("lacks a column"), "{message}");

    let runs: Vec<_> = (0..4)
        .map(|_| {
            let provider = provider.clone();
            tokio::spawn(async move { D::create_schema(&provider).await })
        })
        .collect();
    for run in runs {
        run.await.unwrap().expect("concurrent create_schema");
    }
    D::create_schema(&provider).await.expect("idempotent");
    assert_eq!(row::<D>(&provider, "java").await.fencing_token, 0);
    let lease = provider.acquire(&c).await.unwrap().expect("acquired");
    assert_eq!(lease.fencing_token(), 1);
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
        .fencing_token("token");
    let a = db.build(&table, columns.clone(), "a").unwrap();
    let b = db.build(&table, columns, "b").unwrap();
    D::create_schema(&a).await.expect("create schema");
    let c = config("custom", LONG, Duration::ZERO);
    let lease = a.acquire(&c).await.unwrap().expect("acquired");
    assert!(b.acquire(&c).await.unwrap().is_none());
    let lease = a
        .extend(&lease, LONG, Duration::ZERO)
        .await
        .unwrap()
        .expect("extended");
    assert!(a.release(&lease).await.unwrap());
    assert_eq!(
        b.acquire(&c)
            .await
            .unwrap()
            .expect("released")
            .fencing_token(),
        2
    );
    let rows = D::list_locks(&a).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert!(
        rows[0].to_string().starts_with("custom: held by b until "),
        "{}",
        rows[0]
    );
    drop_table(db, &table).await;
}

/// `lock_state` and `list_locks` report holder, token and whether the lease runs.
pub(crate) async fn inspection_reports_rows<D: TestDb>(db: &D) {
    let provider = fresh(db, "inspector").await;
    assert!(D::list_locks(&provider).await.unwrap().is_empty());
    assert!(D::lock_state(&provider, "none").await.unwrap().is_none());
    let held = provider
        .acquire(&config("b-held", LONG, Duration::ZERO))
        .await
        .unwrap()
        .unwrap();
    let done = provider
        .acquire(&config("a-done", LONG, Duration::ZERO))
        .await
        .unwrap()
        .unwrap();
    assert!(provider.release(&done).await.unwrap());
    let rows = D::list_locks(&provider).await.unwrap();
    let summary: Vec<_> = rows
        .iter()
        .map(|r| {
            (
                r.name.as_str(),
                r.locked_by.as_str(),
                r.fencing_token,
                r.held,
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("a-done", "inspector", 1, false),
            ("b-held", "inspector", 1, true)
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

/// What the cases need from a provider beyond the trait, the same for every dialect.
pub(crate) trait ProviderExt: Sized {
    fn table_name(&self) -> &str;
    fn clone_as(&self, holder: &str) -> Self;
}

/// Generates one `#[tokio::test]` per case for a `TestDb` expression (`Option`, `None` skips).
#[macro_export]
macro_rules! sql_provider_cases {
    ($db:expr) => {
        $crate::sql_provider_cases!(@cases ($db)
            lease_times_are_database_times,
            far_future_row_is_held,
            shedlock_rows_are_taken_over,
            exhausted_token_fails_cleanly,
            deleted_row_is_recreated,
            missing_table_is_a_clear_error,
            hostile_identifiers_are_rejected,
            sql_looking_names_are_plain_names,
            names_longer_than_the_column_fail_clearly,
            create_schema_upgrades_shedlock_tables,
            custom_columns_and_schema_work,
            inspection_reports_rows,
        );
    };
    (@cases ($db:expr) $($case:ident,)*) => {
        $(
            #[::tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $case() {
                if let ::core::option::Option::Some(db) = $db.await {
                    $crate::common::scenarios::$case(&db).await;
                }
            }
        )*
    };
}
