//! `MySqlLockProvider` against a real MySQL or MariaDB: the conformance suite, the SQL provider
//! cases, and MySQL specifics (session time zones, case-sensitive names, the fencing guard).
//! Needs `SHEDLOCK_TEST_MYSQL_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::time::Duration;

use shedlock_core::LockProvider;
#[allow(unused_imports)]
use shedlock_core::{LockInspector as _, LockQuery, LockRecord};
use shedlock_sqlx::MySqlLockProvider;
use sqlx::mysql::MySqlPoolOptions;
use sqlx::{AssertSqlSafe, Executor, MySqlPool};

use common::lease_config;
use common::scenarios::{ProviderExt, drop_table, fresh};
use shedlock_test_support::mysql_url;

/// A pool whose connections run in `READ COMMITTED`, as `MySqlLockProvider::connect` sets
/// them up on MariaDB (batches then take one statement each), and run `setting` (a `SET …`
/// statement) when they open.
async fn pool_with(setting: Option<String>) -> Option<MySqlPool> {
    pool_in_isolation("READ COMMITTED", setting).await
}

/// A pool whose connections run in `isolation` and run `setting` when they open.
async fn pool_in_isolation(isolation: &'static str, setting: Option<String>) -> Option<MySqlPool> {
    let url = mysql_url()?;
    let pool = MySqlPoolOptions::new()
        .max_connections(4)
        .after_connect(move |conn, _| {
            let setting = setting.clone();
            Box::pin(async move {
                let isolation = format!("SET SESSION TRANSACTION ISOLATION LEVEL {isolation}");
                conn.execute(AssertSqlSafe(isolation)).await?;
                if let Some(setting) = setting {
                    conn.execute(AssertSqlSafe(setting)).await?;
                }
                Ok(())
            })
        })
        .connect(&url)
        .await
        .expect("connect to SHEDLOCK_TEST_MYSQL_URL");
    Some(pool)
}

async fn pool_in_time_zone(time_zone: Option<&'static str>) -> Option<MySqlPool> {
    pool_with(time_zone.map(|zone| format!("SET time_zone = '{zone}'"))).await
}

/// A pool whose sessions run in `sql_mode` (as a server configured so would give them).
async fn pool_in_sql_mode(sql_mode: &'static str) -> Option<MySqlPool> {
    pool_with(Some(format!("SET SESSION sql_mode = '{sql_mode}'"))).await
}

async fn pool() -> Option<MySqlPool> {
    pool_in_time_zone(None).await
}

test_db!(MySql(MySqlPool) for MySqlLockProvider {
    timestamp: "DATETIME(3)",
    java: Some(common::scenarios::JavaSql {
        ddl: "CREATE TABLE {t}(name VARCHAR(64) NOT NULL, lock_until TIMESTAMP(3) NOT NULL, \
              locked_at TIMESTAMP(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3), \
              locked_by VARCHAR(255) NOT NULL, PRIMARY KEY (name))",
        rows: "INSERT IGNORE INTO {t}(name, lock_until, locked_at, locked_by) VALUES \
               ('held', UTC_TIMESTAMP(3) + INTERVAL 3600000000 MICROSECOND, UTC_TIMESTAMP(3), \
               'java-host'), \
               ('expired', UTC_TIMESTAMP(3) - INTERVAL 60000000 MICROSECOND, \
               UTC_TIMESTAMP(3) - INTERVAL 120000000 MICROSECOND, 'java-host')",
        acquire: "UPDATE {t} SET lock_until = UTC_TIMESTAMP(3) + INTERVAL 600000000 MICROSECOND, \
                  locked_at = UTC_TIMESTAMP(3), locked_by = 'java-host' \
                  WHERE name = '{name}' AND lock_until <= UTC_TIMESTAMP(3)",
    }),
    enforces_varchar: true,
    statements: [3, 2, 1, 1, 2],
    batch_statements: [1, 1, 1],
    run_statements: [2, 1, 1],
    together_statements: [2, 1, 1],
    old_run_table: "CREATE TABLE {r} (lock_name VARCHAR(64) CHARACTER SET utf8mb4 COLLATE \
                    utf8mb4_bin NOT NULL, fencing_token BIGINT NOT NULL, attempt INTEGER NOT NULL, \
                    job VARCHAR(255) NOT NULL, tick DATETIME(3) NULL, holder VARCHAR(255) NOT NULL, \
                    started_at DATETIME(3) NOT NULL, finished_at DATETIME(3) NULL, \
                    outcome VARCHAR(16) NOT NULL, error VARCHAR(2000) CHARACTER SET utf8mb4 NULL, \
                    PRIMARY KEY (lock_name, fencing_token, attempt), INDEX (started_at))",
    index_names: "SELECT DISTINCT index_name FROM information_schema.statistics \
                  WHERE table_schema = DATABASE() AND table_name = '{r}' AND index_name <> 'PRIMARY'",
    clock_query: "SELECT UTC_TIMESTAMP(3)",
    schema_query: "SELECT DATABASE()",
});

sql_provider_tests!(MySql, pool());
sql_run_cases!(async {
    Some(MySql {
        pool: pool().await?,
    })
});

/// The whole suite (conformance and SQL cases) again under each `sql_mode` users set that
/// changes how statements read: MariaDB's `SIMULTANEOUS_ASSIGNMENT` (an `UPDATE`'s assignments
/// all see the old row), quoting, concatenation and escaping modes, strict mode off, the
/// zero-date modes, and the `ANSI` and `TRADITIONAL` bundles.
mod sql_modes {
    use super::*;

    macro_rules! under_sql_mode {
        ($($module:ident: $mode:literal,)*) => {$(
            mod $module {
                use super::*;
                sql_provider_tests!(MySql, pool_in_sql_mode($mode));
            }
        )*};
    }

    under_sql_mode! {
        simultaneous_assignment: "SIMULTANEOUS_ASSIGNMENT",
        ansi_quotes: "ANSI_QUOTES",
        pipes_as_concat: "PIPES_AS_CONCAT",
        no_backslash_escapes: "NO_BACKSLASH_ESCAPES",
        not_strict: "",
        no_zero_date: "NO_ZERO_DATE,NO_ZERO_IN_DATE,STRICT_ALL_TABLES",
        ansi: "ANSI",
        traditional: "TRADITIONAL",
    }
}

/// In a table made by `create_schema` lock names are case-sensitive, as in the other dialects.
#[tokio::test]
async fn lock_names_are_case_sensitive() {
    let Some(pool) = pool().await else { return };
    let db = MySql { pool };
    let provider = fresh(&db, "case").await;
    for name in ["Report", "report", "REPORT"] {
        assert!(
            provider
                .acquire(&lease_config(name, Duration::from_secs(60)))
                .await
                .unwrap()
                .is_some(),
            "{name}"
        );
    }
    drop_table(&db, provider.table_name()).await;
}

/// `LAST_INSERT_ID` is per connection: a connection whose last acquisition set it must still
/// report a held lock as held (the OK packet carries 0 when the statement did not set it).
#[tokio::test]
async fn held_lock_is_held_on_the_connection_that_took_it() {
    let Some(url) = mysql_url() else {
        return;
    };
    let one_connection = MySqlPoolOptions::new()
        .max_connections(1)
        .connect(&url)
        .await
        .unwrap();
    let db = MySql {
        pool: one_connection,
    };
    let a = fresh(&db, "a").await;
    let b = a.clone_as("b");
    let c = lease_config("one-connection", Duration::from_secs(60));
    let first = a.acquire(&c).await.unwrap().expect("first use");
    assert!(a.release(&first).await.unwrap());
    let second = a.acquire(&c).await.unwrap().expect("taken again");
    assert!(second.fencing_token() > first.fencing_token());
    assert!(
        b.acquire(&c).await.unwrap().is_none(),
        "a stale LAST_INSERT_ID acquired a held lock"
    );
    assert!(a.acquire(&c).await.unwrap().is_none());
    drop_table(&db, a.table_name()).await;
}

session_time_zones_case!(MySql, pool_in_time_zone, "+13:00", "-12:00");

lost_answer_case!(MySql, MySqlPoolOptions, mysql_url);

fencing_guard_case!(MySql, pool, "?");

/// Sessions in `REPEATABLE READ` (a pool of the application's own, in the server's default
/// level) keep batches in their `READ COMMITTED` transaction rather than MariaDB's one
/// statement, whose locking reads would take gap locks there: two instances asking for the
/// same 300 locks at once, in opposite orders, get each exactly once, on first use and again
/// once the rows exist, and release them all in batches.
#[tokio::test]
async fn batches_in_repeatable_read_take_their_transaction() {
    use shedlock_core::{LockConfiguration, LockLease};

    let Some(pool) = pool_in_isolation("REPEATABLE READ", None).await else {
        return;
    };
    common::statements::record();
    let db = MySql { pool };
    let a = fresh(&db, "a").await;
    let b = a.clone_as("b");
    let table = a.table_name().to_owned();
    let configs: Vec<LockConfiguration> = (0..300)
        .map(|i| lease_config(&format!("rr-{i:03}"), Duration::from_secs(600)))
        .collect();
    let reversed: Vec<LockConfiguration> = configs.iter().rev().cloned().collect();
    for round in 0..2 {
        let before = common::statements::executed_on(&table);
        let (from_a, from_b) = tokio::join!(a.acquire_many(&configs), b.acquire_many(&reversed));
        let statements = common::statements::executed_on(&table) - before;
        let from_a: Vec<Option<LockLease>> = from_a.into_iter().map(Result::unwrap).collect();
        let from_b: Vec<Option<LockLease>> = from_b.into_iter().map(Result::unwrap).collect();
        for (i, lease) in from_a.iter().enumerate() {
            let other = &from_b[configs.len() - 1 - i];
            assert!(
                lease.is_some() != other.is_some(),
                "round {round}: lock {i} granted to both or to neither"
            );
        }
        // Three statements naming the table per batch, not one: the transaction's.
        assert!(statements >= 6, "round {round}: {statements} statements");
        for (provider, leases) in [(&a, from_a), (&b, from_b)] {
            let releases = leases.into_iter().flatten().map(|lease| {
                let provider = provider.clone();
                tokio::spawn(async move { provider.release(&lease).await.unwrap() })
            });
            for released in futures_util::future::join_all(releases).await {
                assert!(
                    released.unwrap(),
                    "round {round}: a live lease was not released"
                );
            }
        }
    }
    drop_table(&db, &table).await;
}

/// `connect`'s pool runs its sessions in `READ COMMITTED` on MariaDB 10.5 and later (batches
/// then cost one statement each), and in the server's level on MySQL.
#[tokio::test]
async fn connect_sets_read_committed_on_mariadb() {
    let Some(url) = mysql_url() else {
        return;
    };
    let provider = MySqlLockProvider::connect(&url).await.unwrap();
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(provider.pool())
        .await
        .unwrap();
    if !version.contains("MariaDB") {
        println!("skipped: not MariaDB ({version})");
        return;
    }
    let isolation: String = sqlx::query_scalar("SELECT @@tx_isolation")
        .fetch_one(provider.pool())
        .await
        .unwrap();
    assert_eq!(isolation, "READ-COMMITTED");
}
