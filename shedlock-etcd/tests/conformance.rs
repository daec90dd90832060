//! `EtcdLockProvider` against a real etcd cluster: the provider conformance suite, the
//! inspection cases and the run-record cases, unchanged. Needs `SHEDLOCK_TEST_ETCD_URL`;
//! skipped without it, failed without it when `CI=true`.

mod common;

shedlock_conformance::conformance_tests!(async {
    Some(common::harness_over(common::provider("conformance").await?))
});

mod inspection {
    use super::common;

    shedlock_conformance::inspection_tests!(async {
        Some(common::harness_over(common::provider("inspection").await?))
    });
}

mod runs {
    use super::common;

    shedlock_conformance::runs_tests!(async {
        Some(common::harness_over(common::provider("runs").await?))
    });
}
