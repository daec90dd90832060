//! `PgLockProvider` against a real PostgreSQL: the conformance suite, the SQL provider cases,
//! and PostgreSQL specifics (session time zones, release notifications, the fencing guard).
//! Needs `SHEDLOCK_TEST_PG_URL`; skipped without it, failed without it when `CI=true`.

#[path = "postgres/batch.rs"]
mod batch;
mod common;
#[path = "postgres/edges.rs"]
mod edges;

use std::time::Duration;

use shedlock_core::{Error, LockProvider};
#[allow(unused_imports)]
use shedlock_core::{LockInspector as _, LockQuery, LockRecord};
use shedlock_sqlx::PgLockProvider;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use sqlx::{AssertSqlSafe, Executor, PgPool, Postgres};

use common::scenarios::{ProviderExt, TestDb as _, drop_table, fresh};
use common::{lease_config, unique_table};
use shedlock_test_support::pg_url;

async fn pool_in_time_zone(time_zone: Option<&'static str>) -> Option<PgPool> {
    let url = pg_url()?;
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .after_connect(move |conn, _| {
            Box::pin(async move {
                if let Some(zone) = time_zone {
                    conn.execute(AssertSqlSafe(format!("SET TIME ZONE '{zone}'")))
                        .await?;
                }
                Ok(())
            })
        })
        .connect(&url)
        .await
        .expect("connect to SHEDLOCK_TEST_PG_URL");
    Some(pool)
}

async fn pool() -> Option<PgPool> {
    pool_in_time_zone(None).await
}

/// `pool`'s database, and a provider on a new table of it (created), holding as `holder`;
/// `None` (skip) without a pool.
async fn fresh_on(pool: Option<PgPool>, holder: &str) -> Option<(Pg, PgLockProvider)> {
    let db = Pg { pool: pool? };
    let provider = fresh(&db, holder).await;
    Some((db, provider))
}

/// A transaction that has updated (and so row-locks) lock `name` of `table`, without changing
/// it: a concurrent writer of that row waits for it.
async fn hold_row(pool: &PgPool, table: &str, name: &str) -> sqlx::Transaction<'static, Postgres> {
    let update = format!("UPDATE {table} SET locked_by = locked_by WHERE name = $1");
    transaction_after(pool, update, name).await
}

/// A transaction that has run `statement` with `$1` bound to `name`, and holds the row locks it
/// took.
async fn transaction_after(
    pool: &PgPool,
    statement: String,
    name: &str,
) -> sqlx::Transaction<'static, Postgres> {
    let mut tx = pool.begin().await.unwrap();
    sqlx::query(AssertSqlSafe(statement))
        .bind(name)
        .execute(&mut *tx)
        .await
        .unwrap();
    tx
}

/// Waits until `count` acquire statements on `table` wait for a row lock.
async fn wait_for_lock_waits(pool: &PgPool, table: &str, count: i64) {
    // Any statement on the table: pg_stat_activity keeps only the first 1 KB of a statement.
    let pattern = format!("% {table} %");
    for _ in 0..1000 {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND query LIKE $1",
        )
        .bind(&pattern)
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{count} acquire(s) on {table} never waited for a row lock");
}

test_db!(Pg(PgPool) for PgLockProvider {
    timestamp: "TIMESTAMP",
    java: Some(common::scenarios::JavaSql {
        ddl: "CREATE TABLE {t}(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP NOT NULL, \
              locked_at TIMESTAMP NOT NULL, locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))",
        rows: "INSERT INTO {t}(name, lock_until, locked_at, locked_by) VALUES \
               ('held', timezone('utc', CURRENT_TIMESTAMP) + cast('3600 seconds' as interval), \
               timezone('utc', CURRENT_TIMESTAMP), 'java-host'), \
               ('expired', timezone('utc', CURRENT_TIMESTAMP) - cast('60 seconds' as interval), \
               timezone('utc', CURRENT_TIMESTAMP) - cast('120 seconds' as interval), 'java-host')",
        acquire: "UPDATE {t} SET lock_until = timezone('utc', CURRENT_TIMESTAMP) \
                  + cast('600 seconds' as interval), locked_at = timezone('utc', CURRENT_TIMESTAMP), \
                  locked_by = 'java-host' WHERE name = '{name}' \
                  AND lock_until <= timezone('utc', CURRENT_TIMESTAMP)",
    }),
    enforces_varchar: true,
    statements: [1, 1, 1, 1, 1],
    batch_statements: [1, 1, 1],
    run_statements: [1, 1, 1],
    together_statements: [1, 1, 1],
    old_run_table: "CREATE TABLE {r} (lock_name VARCHAR(64) NOT NULL, fencing_token BIGINT NOT NULL, \
                    attempt INTEGER NOT NULL, job VARCHAR(255) NOT NULL, tick TIMESTAMP, \
                    holder VARCHAR(255) NOT NULL, started_at TIMESTAMP NOT NULL, \
                    finished_at TIMESTAMP, outcome VARCHAR(16) NOT NULL, error VARCHAR(2000), \
                    PRIMARY KEY (lock_name, fencing_token, attempt)); \
                    CREATE INDEX IF NOT EXISTS {r}_started ON {r} (started_at)",
    index_names: "SELECT indexname::text FROM pg_indexes WHERE tablename = '{r}' \
                  AND indexname <> '{r}_pkey'",
    clock_query: "SELECT timezone('utc', clock_timestamp())",
    schema_query: "SELECT current_schema()::text",
});

sql_provider_tests!(Pg, pool());

sql_run_cases!(async {
    Some(Pg {
        pool: pool().await?,
    })
});

/// Whether no notification arrives within `millis`.
async fn quiet_for(listener: &mut PgListener, millis: u64) -> bool {
    tokio::time::timeout(Duration::from_millis(millis), listener.recv())
        .await
        .is_err()
}

/// Releases notify the release channel in the same statement once the provider listens for
/// hints (or always, if so built), and `release_hints` delivers the lock name.
#[tokio::test]
async fn release_notifies_listeners() {
    let Some((db, provider)) = fresh_on(pool().await, "notifier").await else {
        return;
    };
    let (pool, table) = (&db.pool, provider.table_name());
    let channel = provider
        .release_channel()
        .expect("a channel by default")
        .to_owned();
    assert_eq!(channel, format!("{table}_released"));
    let mut listener = PgListener::connect_with(pool).await.unwrap();
    listener.listen(&channel).await.unwrap();
    let c = lease_config("notified", Duration::from_secs(60));

    // Nobody in this process listens for hints yet: releases do not notify.
    let other_holder = provider.with_holder("other").unwrap();
    let lease = other_holder.acquire(&c).await.unwrap().unwrap();
    assert!(other_holder.release(&lease).await.unwrap());
    assert!(
        quiet_for(&mut listener, 300).await,
        "notified without listeners"
    );

    // Once it listens (asynchronously, after subscribing), releases by it and its clones do.
    let mut hints = provider.release_hints().expect("hints with a channel");
    let mut hinted = false;
    for _ in 0..50 {
        let lease = other_holder.acquire(&c).await.unwrap().unwrap();
        assert!(other_holder.release(&lease).await.unwrap());
        if let Ok(Ok(name)) = tokio::time::timeout(Duration::from_millis(100), hints.recv()).await {
            assert_eq!(&*name, "notified");
            hinted = true;
            break;
        }
    }
    assert!(hinted, "no release hint within 50 releases");
    let notification = listener.recv().await.unwrap();
    assert_eq!(notification.payload(), "notified");
    while !quiet_for(&mut listener, 100).await {}
    // A refused release notifies nobody.
    assert!(!other_holder.release(&lease).await.unwrap());
    assert!(
        quiet_for(&mut listener, 300).await,
        "a refused release notified"
    );

    let always = PgLockProvider::builder(pool.clone())
        .table(table)
        .release_channel("Jobs Freed")
        .hint_every_release()
        .build()
        .unwrap();
    assert_eq!(always.release_channel(), Some("Jobs Freed"));
    listener.listen("Jobs Freed").await.unwrap();
    let lease = always.acquire(&c).await.unwrap().unwrap();
    assert!(always.release(&lease).await.unwrap());
    let notification = tokio::time::timeout(Duration::from_secs(5), listener.recv())
        .await
        .expect("notified within 5 s")
        .unwrap();
    assert_eq!(
        (notification.channel(), notification.payload()),
        ("Jobs Freed", "notified")
    );

    let never = PgLockProvider::builder(pool.clone())
        .table(table)
        .without_release_hints()
        .build()
        .unwrap();
    assert!(never.release_channel().is_none() && never.release_hints().is_none());

    let bad = PgLockProvider::builder(pool.clone())
        .table(table)
        .release_channel("c".repeat(64))
        .build();
    assert!(
        matches!(
            bad,
            Err(Error::InvalidConfig {
                field: "release_channel",
                ..
            })
        ),
        "{bad:?}"
    );
    // A table name too long for `<table>_released` still gets a channel of its own.
    let long = PgLockProvider::builder(pool.clone())
        .table("a".repeat(60))
        .build()
        .unwrap();
    let channel = long.release_channel().unwrap();
    assert!(
        channel.len() <= 63 && channel.ends_with("_released"),
        "{channel}"
    );
    drop_table(&db, table).await;
}

session_time_zones_case!(
    Pg,
    pool_in_time_zone,
    "Pacific/Kiritimati",
    "Pacific/Pago_Pago"
);

lost_answer_case!(Pg, PgPoolOptions, pg_url);

fencing_guard_case!(Pg, pool, "$1");

/// The provider on a database whose every transaction runs at `SERIALIZABLE`, as CockroachDB's
/// do: the conformance suite, the SQL provider cases, serialization failures retried and never
/// reported, and an 8-worker lost-update fuzz that tolerates no error at all.
mod serializable {
    use std::str::FromStr;
    use std::sync::Arc;

    use shedlock_conformance::{FuzzedName, counter_fuzz};
    use tokio::sync::OnceCell;

    use super::*;

    const DATABASE: &str = "shedlock_serializable";

    /// A pool on `shedlock_serializable`, created on the `SHEDLOCK_TEST_PG_URL` server (once per
    /// test binary) with `default_transaction_isolation = 'serializable'`.
    pub(super) async fn pool() -> Option<PgPool> {
        static CREATED: OnceCell<()> = OnceCell::const_new();
        let admin = super::pool().await?;
        CREATED
            .get_or_init(|| async {
                let exists: bool = sqlx::query_scalar(
                    "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)",
                )
                .bind(DATABASE)
                .fetch_one(&admin)
                .await
                .expect("read pg_database");
                if !exists {
                    // Another test binary may create it at the same time.
                    if let Err(e) = admin.execute(AssertSqlSafe(format!("CREATE DATABASE {DATABASE}"))).await {
                        let code = e.as_database_error().and_then(|d| d.code());
                        assert!(
                            matches!(code.as_deref(), Some("42P04" | "23505")),
                            "create {DATABASE}: {e}"
                        );
                    }
                }
                admin
                    .execute(AssertSqlSafe(format!(
                        "ALTER DATABASE {DATABASE} SET default_transaction_isolation = 'serializable'"
                    )))
                    .await
                    .expect("make the database serializable");
            })
            .await;
        let url = std::env::var("SHEDLOCK_TEST_PG_URL").expect("checked by pool()");
        let options = PgConnectOptions::from_str(&url)
            .expect("a valid URL")
            .database(DATABASE);
        let pool = PgPoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .expect("connect to the serializable database");
        let isolation: String = sqlx::query_scalar("SHOW transaction_isolation")
            .fetch_one(&pool)
            .await
            .expect("read the isolation level");
        assert_eq!(isolation, "serializable");
        Some(pool)
    }

    sql_provider_tests!(Pg, pool());

    /// An acquire whose statement waits behind a concurrent update of its row fails with
    /// SQLSTATE 40001 once that update commits; the provider retries it, and the caller sees
    /// only the outcome.
    #[tokio::test]
    async fn serialization_failure_is_retried_not_reported() {
        let Some((db, provider)) = fresh_on(pool().await, "retried").await else {
            return;
        };
        let (pool, table) = (&db.pool, provider.table_name());
        let c = lease_config("conflict", Duration::from_secs(60));
        let first = provider.acquire(&c).await.unwrap().expect("free");
        assert!(provider.release(&first).await.unwrap());

        let other = hold_row(pool, table, "conflict").await;
        let acquiring = {
            let provider = provider.clone();
            let c = c.clone();
            tokio::spawn(async move { provider.acquire(&c).await })
        };
        // The acquire now waits for the row; without a retry it would fail at the commit.
        wait_for_lock_waits(pool, table, 1).await;
        other.commit().await.unwrap();
        let lease = acquiring
            .await
            .unwrap()
            .expect("no error: the serialization failure was retried")
            .expect("the lock was free");
        assert!(lease.fencing_token() > first.fencing_token());
        drop_table(&db, table).await;
    }

    /// 8 workers on 2 lock names at `SERIALIZABLE`: no update lost, and not one error reported
    /// to a job, although contended acquisitions conflict.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn contended_fuzz_reports_no_error() {
        const WORKERS: usize = 8;
        const QUOTA: u64 = 15;
        let Some((db, provider)) = fresh_on(pool().await, "fuzzer").await else {
            return;
        };
        let providers = (0..WORKERS)
            .map(|worker| {
                Arc::new(provider.with_holder(format!("w{worker}")).unwrap())
                    as Arc<dyn LockProvider>
            })
            .collect();
        let fuzz = counter_fuzz(providers, ["fuzz0".into(), "fuzz1".into()], QUOTA).await;
        let expected = QUOTA * (WORKERS as u64 / 2);
        for name in &fuzz.names {
            assert_eq!(name.count, expected, "lost updates on {}", name.name);
        }
        assert_eq!(fuzz.errors, 0, "errors reported to jobs");
        for FuzzedName { name, tokens, .. } in &fuzz.names {
            let row = provider.lock_record(name).await.unwrap().unwrap();
            assert_eq!(tokens.len() as u64, expected);
            assert!(
                tokens.windows(2).all(|pair| pair[0] < pair[1]),
                "tokens did not increase from one execution to the next: {tokens:?}"
            );
            assert_eq!(
                Some(row.fencing_token),
                tokens.last().copied(),
                "an acquisition committed without running the job"
            );
        }
        drop_table(&db, provider.table_name()).await;
    }
}

/// The run table's pages are read through its indexes, newest first, without sorting what they
/// read (across locks, rows of the same start, token and attempt are put in lock order, an
/// incremental sort of those ties): `EXPLAIN`
/// of the provider's own statements over 200 locks of 300 runs each (analysed), with the
/// planner's custom plan and with the generic plan a prepared statement may settle on.
#[tokio::test]
async fn run_pages_are_read_through_the_indexes() {
    let Some((db, provider)) = fresh_on(pool().await, "explain").await else {
        return;
    };
    let r = provider.runs_table().to_owned();
    db.execute(&format!(
        "INSERT INTO {r} SELECT 'lock-' || l, t, 1, 'job', NULL, 'h', \
         timezone('utc', clock_timestamp()) - t * INTERVAL '1 second' - l * INTERVAL '1 millisecond', \
         NULL, 'succeeded', NULL FROM generate_series(1, 200) l, generate_series(1, 300) t; \
         ANALYZE {r}"
    ))
    .await;
    let [one, all, started] = provider.run_sql();
    let mut connection = db.pool.acquire().await.unwrap();
    let far = "'1000-01-01', '9999-12-31 23:59:59.999', 9223372036854775807, 2147483647, ''";
    let cases = [
        (
            one,
            format!("'lock-7', {far}, 50"),
            format!("{r}_lock_newest"),
        ),
        (all, format!("{far}, 50"), format!("{r}_newest")),
    ];
    for mode in ["auto", "force_generic_plan"] {
        connection
            .execute(AssertSqlSafe(format!("SET plan_cache_mode = {mode}")))
            .await
            .unwrap();
        for (i, (sql, args, index)) in cases.iter().enumerate() {
            connection
                .execute(AssertSqlSafe(format!("PREPARE page{i} AS {sql}")))
                .await
                .unwrap();
            let plan: Vec<String> =
                sqlx::query_scalar(AssertSqlSafe(format!("EXPLAIN EXECUTE page{i}({args})")))
                    .fetch_all(&mut *connection)
                    .await
                    .unwrap();
            let plan = plan.join("\n");
            println!("{mode}:\n{plan}\n");
            let sorts = plan.lines().any(|line| {
                let node = line.trim_start().trim_start_matches("->").trim_start();
                node.starts_with("Sort  (")
            });
            assert!(
                plan.contains(&format!("Index Scan Backward using {index} ")) && !sorts,
                "{mode}: {plan}"
            );
            connection
                .execute(AssertSqlSafe(format!("DEALLOCATE page{i}")))
                .await
                .unwrap();
        }
    }
    // Starts (with their trims) read through the indexes too: never a scan of every row.
    connection
        .execute(AssertSqlSafe(format!("PREPARE started AS {started}")))
        .await
        .unwrap();
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN EXECUTE started('{lock-7,lock-9}', '{1,1}', '{1,1}', \
            '{job,job}', '{NULL,NULL}', '{h,h}', '{30000,NULL}')",
    )
    .fetch_all(&mut *connection)
    .await
    .unwrap();
    let plan = plan.join("\n");
    println!("start:\n{plan}\n");
    assert!(!plan.contains("Seq Scan"), "{plan}");
    drop(connection);
    drop_table(&db, provider.table_name()).await;
}
