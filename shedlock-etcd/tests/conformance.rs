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
    use std::time::Duration;

    use shedlock_conformance::Harness;
    use shedlock_conformance::fleet::FleetHarness;
    use shedlock_core::{Board, LockProvider};
    use shedlock_etcd::EtcdLockProvider;

    use super::common;

    struct FleetOn(EtcdLockProvider);

    #[shedlock_core::async_trait]
    impl Harness for FleetOn {
        async fn provider(&self, holder: &str) -> Arc<dyn LockProvider> {
            Arc::new(self.0.with_holder(holder).expect("valid holder"))
        }

        async fn pass_time(&self, duration: Duration) {
            tokio::time::sleep(duration).await;
        }
    }

    #[shedlock_core::async_trait]
    impl FleetHarness for FleetOn {
        async fn board(&self) -> Arc<dyn Board> {
            let provider = common::provider("board").await;
            Arc::new(provider.expect("SHEDLOCK_TEST_ETCD_URL"))
        }
    }

    shedlock_conformance::fleet_tests!(async { Some(FleetOn(common::provider("fleet").await?)) });
}
