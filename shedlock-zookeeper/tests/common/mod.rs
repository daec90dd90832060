//! What the ZooKeeper test files share: the ensemble's connect string (skip locally, fail on
//! CI), a root of their own per test, and the conformance harness.

#![allow(dead_code)] // each test binary uses a different part

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::LockProvider;
use shedlock_core::conformance::{Harness, unique_lock_name};
use shedlock_zookeeper::ZkLockProvider;

#[path = "../../../shedlock-sqlx/tests/common/env.rs"]
mod env;

/// The ensemble's connect string from `SHEDLOCK_TEST_ZK_URL`, or `None` after one line saying
/// the test was skipped (a failure when `CI=true`).
pub(crate) fn zk_url() -> Option<String> {
    env::database_url(
        "SHEDLOCK_TEST_ZK_URL",
        "ZooKeeper",
        "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183 (bash .ci/zookeeper.sh start)",
    )
}

/// A root no other test (thread or process) uses.
pub(crate) fn unique_root(base: &str) -> String {
    format!("/shedlock-test/{}", unique_lock_name(base))
}

/// A provider on a root of its own, schema created.
pub(crate) async fn provider(base: &str) -> Option<ZkLockProvider> {
    let url = zk_url()?;
    let provider = ZkLockProvider::builder(url)
        .root(unique_root(base))
        .holder("tester")
        .connect()
        .await
        .expect("connect to SHEDLOCK_TEST_ZK_URL");
    provider.create_schema().await.expect("create the schema");
    Some(provider)
}

/// The conformance harness: providers per holder on one root, and real waiting (the
/// ensemble's clock cannot be stepped).
pub(crate) struct ZkHarness {
    provider: ZkLockProvider,
}

impl ZkHarness {
    pub(crate) async fn connect() -> Option<Self> {
        Some(ZkHarness {
            provider: provider("conformance").await?,
        })
    }
}

#[shedlock_core::async_trait]
impl Harness for ZkHarness {
    async fn provider(&self, holder: &str) -> Arc<dyn LockProvider> {
        Arc::new(self.provider.with_holder(holder).expect("valid holder"))
    }

    async fn pass_time(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }
}
