//! `ZkLockProvider` against a real ZooKeeper ensemble: the provider conformance suite, unchanged,
//! without credentials and with them. Needs `SHEDLOCK_TEST_ZK_URL`; skipped without it, failed
//! without it when `CI=true`.

mod common;

shedlock_core::conformance_tests!(common::ZkHarness::connect());

/// The suite on a provider with digest credentials, whose nodes are closed to other clients.
mod authenticated {
    use super::common;

    shedlock_core::conformance_tests!(common::ZkHarness::connect_authenticated());
}
