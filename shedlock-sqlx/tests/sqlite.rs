//! `SqliteLockProvider` on a database file and in memory: the conformance suite and SQLite
//! specifics. Needs no server.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use shedlock_core::LockProvider;
use shedlock_sqlx::SqliteLockProvider;

use common::{DbHarness, unique_table};

/// A fresh database file under Cargo's scratch directory for integration tests.
fn database_file() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{}.db", unique_table("shedlock")))
}

async fn file_provider() -> SqliteLockProvider {
    let url = format!("sqlite://{}", database_file().display());
    let provider = SqliteLockProvider::connect(&url)
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

fn harness(provider: SqliteLockProvider) -> DbHarness {
    DbHarness::new(move |holder| {
        Arc::new(provider.with_holder(holder).expect("valid holder")) as Arc<dyn LockProvider>
    })
}

mod conformance_file {
    use super::*;
    shedlock_core::conformance_tests!(async { Some(harness(file_provider().await)) });
}

mod conformance_memory {
    use super::*;
    shedlock_core::conformance_tests!(async { Some(harness(memory_provider().await)) });
}
