//! Leader election on etcd: the election scenario every store passes, with `EtcdElector`
//! (candidate keys on leases) and with the provider's lease elector (any lock provider is
//! one), three candidates each on connections of its own through proxies that can be cut.
//! Needs `SHEDLOCK_TEST_ETCD_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::conformance::election::{Candidate, leader_handover};
use shedlock_core::{ElectionConfig, Elector, LeaderElection};
use shedlock_etcd::EtcdLockProvider;
use shedlock_test_support::{CutProxy, ProxyMode, upstream_of};

/// etcd's leases are whole seconds, 2 s at least.
const CONFIG: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_millis(3_000),
    renew_deadline: Duration::from_millis(2_000),
    retry_period: Duration::from_millis(500),
};

/// Proxies to every member of the cluster, for one candidate; and the endpoints through them.
async fn proxies(url: &str) -> (Vec<CutProxy>, String) {
    let (mut proxies, mut through) = (Vec::new(), Vec::new());
    for endpoint in url.split(',') {
        let proxy = CutProxy::start(&upstream_of(endpoint).unwrap())
            .await
            .unwrap();
        through.push(proxy.url_through(endpoint).unwrap());
        proxies.push(proxy);
    }
    (proxies, through.join(","))
}

fn cut_all(proxies: Vec<CutProxy>) -> impl Fn() -> std::future::Ready<()> + Send + Sync {
    move || {
        for proxy in &proxies {
            proxy.set(ProxyMode::Reset);
        }
        std::future::ready(())
    }
}

#[derive(Debug, Clone, Copy)]
enum Kind {
    /// `EtcdElector`.
    Keys,
    /// The provider itself, as every lock provider is an elector.
    Lease,
}

async fn election(kind: Kind) {
    let Some(url) = common::etcd_url() else {
        return;
    };
    let prefix = common::unique_key_prefix("election");
    let mut candidates = Vec::new();
    for who in 0..3 {
        let (proxies, through) = proxies(&url).await;
        let holder = format!("candidate-{who}");
        let provider = EtcdLockProvider::builder(through)
            .prefix(&prefix)
            .holder(holder)
            .request_timeout(Duration::from_millis(500))
            .connect()
            .await
            .expect("connect");
        let elector: Arc<dyn Elector> = match kind {
            Kind::Keys => Arc::new(provider.elector()),
            Kind::Lease => Arc::new(provider),
        };
        candidates.push(Candidate::new(elector, cut_all(proxies)));
    }
    leader_handover(&format!("etcd {kind:?}"), CONFIG, candidates).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elector_on_candidate_keys() {
    election(Kind::Keys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elector_on_the_providers_leases() {
    election(Kind::Lease).await;
}

/// Election names that would reach into another election's keys are refused, naming the
/// field.
#[tokio::test]
async fn an_election_name_with_a_slash_is_refused() {
    let Some(provider) = common::provider("election-name").await else {
        return;
    };
    let error = LeaderElection::builder("a/b", provider.elector())
        .start()
        .expect_err("a name with '/'");
    assert!(error.to_string().contains("`name`"), "{error}");
}
