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

/// The fleet's board: each board on a root of its own, schema created; time passes by waiting
/// (the ensemble's clock cannot be stepped).
mod fleet {
    use std::sync::Arc;

    use shedlock_conformance::ServerHarness;
    use shedlock_core::{Board, LockProvider};

    use super::common;

    async fn harness() -> Option<ServerHarness> {
        let provider = common::provider("fleet").await?;
        let harness = ServerHarness::new(move |holder| {
            Arc::new(provider.with_holder(holder).expect("valid holder")) as Arc<dyn LockProvider>
        });
        Some(harness.with_boards(|| async {
            let provider = common::provider("board").await;
            Arc::new(provider.expect("SHEDLOCK_TEST_ZK_URL")) as Arc<dyn Board>
        }))
    }

    shedlock_conformance::fleet_tests!(harness());
}
