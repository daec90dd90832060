//! PostgreSQL at the edges users run into: a commit that fails after the statement's rows
//! were sent.

use super::*;

/// Creates on `table` a deferred constraint trigger that refuses every commit touching it: the
/// statement runs and streams its rows, then the commit fails (as a deferred foreign key, or a
/// serialization failure detected at commit under `SERIALIZABLE`, would).
async fn refuse_commits(pool: &PgPool, table: &str) {
    let function = format!("{table}_refuse");
    pool.execute(AssertSqlSafe(format!(
        "CREATE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'commit refused by the test'; END $$"
    )))
    .await
    .unwrap();
    pool.execute(AssertSqlSafe(format!(
        "CREATE CONSTRAINT TRIGGER {function} AFTER INSERT OR UPDATE ON {table} \
         DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {function}()"
    )))
    .await
    .unwrap();
}

async fn allow_commits(pool: &PgPool, table: &str) {
    let function = format!("{table}_refuse");
    pool.execute(AssertSqlSafe(format!(
        "DROP TRIGGER {function} ON {table}; DROP FUNCTION {function}()"
    )))
    .await
    .unwrap();
}

/// A statement whose commit fails grants, extends and releases nothing, and says so: reading
/// only the `RETURNING` row reported a lease (or an extension, or a release) the database
/// rolled back, and a second holder then got the same lock.
#[tokio::test]
async fn failed_commit_is_never_reported_as_done() {
    let Some((db, a)) = fresh_on(pool().await, "a").await else {
        return;
    };
    let (pool, table, b) = (&db.pool, a.table_name(), a.clone_as("b"));
    let held = a
        .acquire(&lease_config("held", Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("free");
    refuse_commits(pool, table).await;

    let c = lease_config("commit", Duration::from_secs(60));
    let acquired = a.acquire(&c).await;
    assert!(
        matches!(acquired, Err(Error::Store { .. })),
        "acquire whose commit failed: {acquired:?}"
    );
    let extended = a
        .extend(&held, Duration::from_secs(3600), Duration::ZERO)
        .await;
    assert!(
        matches!(extended, Err(Error::Store { .. })),
        "extend whose commit failed: {extended:?}"
    );
    let released = a.release(&held).await;
    assert!(
        matches!(released, Err(Error::Store { .. })),
        "release whose commit failed: {released:?}"
    );

    allow_commits(pool, table).await;
    let row = a.lock_record("held").await.unwrap().unwrap();
    assert!(row.held, "the failed release changed nothing");
    assert_eq!(
        row.lock_until,
        held.lock_until(),
        "nor did the failed extension"
    );
    let lease = b.acquire(&c).await.unwrap().expect("nothing was committed");
    assert!(b.release(&lease).await.unwrap());
    drop_table(&db, table).await;
}

/// `timestamp(0)` to `timestamp(2)` round stored times by up to half a second, beyond any
/// lease's clock allowance: the schema check refuses them (and `doctor` with it), as it refuses
/// `timestamptz`; millisecond precision and more are accepted.
#[tokio::test]
async fn imprecise_timestamps_are_refused() {
    let Some(pool) = pool().await else { return };
    for (ty, fits) in [
        ("TIMESTAMP(0)", false),
        ("TIMESTAMP(2)", false),
        ("TIMESTAMPTZ", false),
        ("TIMESTAMP(3)", true),
        ("TIMESTAMP(6)", true),
        ("TIMESTAMP", true),
    ] {
        let table = unique_table("shedlock_precision");
        pool.execute(AssertSqlSafe(format!(
            "CREATE TABLE {table} (name VARCHAR(64) PRIMARY KEY, lock_until {ty} NOT NULL, \
             locked_at {ty} NOT NULL, locked_by VARCHAR(255) NOT NULL, \
             fencing_token BIGINT NOT NULL DEFAULT 0, last_tick BIGINT)"
        )))
        .await
        .unwrap();
        let provider = PgLockProvider::builder(pool.clone())
            .table(&table)
            .build()
            .unwrap();
        // The lock table's issues (a table made by hand has no run table beside it).
        let issues: Vec<_> = provider
            .check_schema()
            .await
            .unwrap()
            .into_iter()
            .filter(|issue| !matches!(issue, shedlock_sqlx::SchemaIssue::MissingTable { .. }))
            .collect();
        if fits {
            assert_eq!(issues, [], "{ty}");
        } else {
            assert_eq!(issues.len(), 2, "{ty}: {issues:?}");
            assert!(
                issues.iter().all(|issue| matches!(
                    issue,
                    shedlock_sqlx::SchemaIssue::WrongType { column, .. }
                        if column == "lock_until" || column == "locked_at"
                )),
                "{ty}: {issues:?}"
            );
        }
        pool.execute(AssertSqlSafe(format!("DROP TABLE {table}")))
            .await
            .unwrap();
    }
}
