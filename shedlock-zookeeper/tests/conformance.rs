//! `ZkLockProvider` against a real ZooKeeper ensemble: the provider conformance suite and the
//! inspection cases, unchanged, without credentials and with them. Needs `SHEDLOCK_TEST_ZK_URL`; skipped without it, failed
//! without it when `CI=true`.

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

/// The suite on a provider with digest credentials, whose nodes are closed to other clients.
mod authenticated {
    use super::common;

    shedlock_conformance::conformance_tests!(async {
        let provider = common::authenticated_provider("conformance-auth").await?;
        Some(common::harness_over(provider))
    });

    mod inspection {
        use super::common;

        shedlock_conformance::inspection_tests!(async {
            let provider = common::authenticated_provider("inspection-auth").await?;
            Some(common::harness_over(provider))
        });
    }
}
