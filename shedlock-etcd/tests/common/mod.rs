//! What the etcd test files share: providers on the test cluster under prefixes of their own,
//! and the conformance harness over a provider. The endpoints (skip locally, fail on CI),
//! unique prefixes and the harness come from `shedlock-test-support`.

#![allow(dead_code)] // each test binary uses a different part

use std::sync::Arc;
use std::time::Duration;

use shedlock_conformance::ServerHarness;
pub(crate) use shedlock_conformance::unique_key_prefix;
use shedlock_core::{LockProvider, RunLog};
use shedlock_etcd::EtcdLockProvider;
pub(crate) use shedlock_test_support::etcd_url;

/// The suite's short lease: etcd's leases are whole seconds, 2 s at least, and expire up to
/// half a second late (the leader checks for expired leases twice a second).
pub(crate) const SHORT_LEASE: Duration = Duration::from_secs(4);

/// A provider on the test cluster under a prefix of its own.
pub(crate) async fn provider(base: &str) -> Option<EtcdLockProvider> {
    let url = etcd_url()?;
    let provider = EtcdLockProvider::builder(url)
        .prefix(unique_key_prefix(base))
        .holder("tester")
        .connect()
        .await
        .expect("connect to SHEDLOCK_TEST_ETCD_URL");
    Some(provider)
}

/// The conformance harness over `provider`: one holder per name, one store, and the provider
/// as inspector and run log (and, with other run-record settings, as the run log keeping
/// them).
pub(crate) fn harness_over(provider: EtcdLockProvider) -> ServerHarness {
    let holders = provider.clone();
    let keeping = provider.clone();
    ServerHarness::new(move |holder| {
        Arc::new(holders.with_holder(holder).expect("valid holder")) as Arc<dyn LockProvider>
    })
    .with_inspector(provider.clone())
    .with_run_log(provider)
    .with_run_log_keeping(move |retention, runs_per_lock| {
        Arc::new(
            keeping
                .with_run_retention(retention, runs_per_lock)
                .expect("valid run-record settings"),
        ) as Arc<dyn RunLog>
    })
    .with_short_lease(SHORT_LEASE)
}
