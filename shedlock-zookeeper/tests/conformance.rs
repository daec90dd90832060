//! `ZkLockProvider` against a real ZooKeeper ensemble: the provider conformance suite, unchanged.
//! Needs `SHEDLOCK_TEST_ZK_URL`; skipped without it, failed without it when `CI=true`.

mod common;

shedlock_core::conformance_tests!(common::ZkHarness::connect());
