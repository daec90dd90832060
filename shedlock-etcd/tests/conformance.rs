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

/// The fleet's board: each board under a prefix of its own; time passes by waiting.
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
            Arc::new(provider.expect("SHEDLOCK_TEST_ETCD_URL")) as Arc<dyn Board>
        }))
    }

    shedlock_conformance::fleet_tests!(harness());
}
