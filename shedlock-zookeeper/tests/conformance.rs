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
    use std::time::Duration;

    use shedlock_conformance::Harness;
    use shedlock_conformance::fleet::FleetHarness;
    use shedlock_core::{Board, LockProvider};
    use shedlock_zookeeper::ZkLockProvider;

    use super::common;

    struct FleetOn(ZkLockProvider);

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
            let provider = common::provider("board")
                .await
                .expect("SHEDLOCK_TEST_ZK_URL");
            Arc::new(provider)
        }
    }

    shedlock_conformance::fleet_tests!(async { Some(FleetOn(common::provider("fleet").await?)) });
}
