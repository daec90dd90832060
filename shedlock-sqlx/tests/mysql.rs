//! `MySqlLockProvider` against a real MySQL or MariaDB: the conformance suite and specifics.
//! Needs `SHEDLOCK_TEST_MYSQL_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::sync::Arc;

use shedlock_core::LockProvider;
use shedlock_sqlx::MySqlLockProvider;
use sqlx::MySqlPool;
use sqlx::mysql::MySqlPoolOptions;

use common::{DbHarness, database_url};

async fn pool() -> Option<MySqlPool> {
    let url = database_url(
        "SHEDLOCK_TEST_MYSQL_URL",
        "MySQL/MariaDB",
        "mysql://root@127.0.0.1:3306/test",
    )?;
    let pool = MySqlPoolOptions::new()
        .max_connections(4)
        .connect(&url)
        .await
        .expect("connect to SHEDLOCK_TEST_MYSQL_URL");
    Some(pool)
}

mod conformance {
    use super::*;

    async fn harness() -> Option<DbHarness> {
        let provider = MySqlLockProvider::builder(pool().await?)
            .table("shedlock_conformance")
            .build()
            .expect("valid configuration");
        provider.create_schema().await.expect("create schema");
        Some(DbHarness::new(move |holder| {
            Arc::new(provider.with_holder(holder).expect("valid holder")) as Arc<dyn LockProvider>
        }))
    }

    shedlock_core::conformance_tests!(harness());
}
