//! Leader election against real databases: the election scenario every store passes, with
//! three candidates, each on its own connections.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Db;
use shedlock::conformance::election::{Candidate, leader_handover};
use shedlock::{ElectionConfig, provider::Elector};

const CONFIG: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_millis(2_000),
    renew_deadline: Duration::from_millis(1_500),
    retry_period: Duration::from_millis(400),
};

/// One leader, stable; a graceful resign hands over within one retry period (on PostgreSQL, at
/// once: the release hint); a leader whose connections are closed steps down before another
/// is elected; terms only increase.
async fn election(db: Db) {
    let Some(first) = common::provider(db, "candidate-0").await else {
        return;
    };
    let mut providers = vec![first.clone()];
    for who in 1..3 {
        providers.push(common::another_instance(&first, &format!("candidate-{who}")).await);
    }
    let candidates = providers
        .iter()
        .map(|provider| {
            let elector: Arc<dyn Elector> = Arc::new(provider.shared());
            let provider = provider.clone();
            Candidate::new(elector, move || {
                let provider = provider.clone();
                async move { provider.close().await }
            })
        })
        .collect();
    leader_handover(&format!("{db:?}"), CONFIG, candidates).await;
    // On connections of its own: one of the candidates' was closed.
    common::another_instance(&first, "cleanup")
        .await
        .remove_store()
        .await;
}

sql_tests!(election);
