//! Leader election on etcd: the election scenario every store passes, with `EtcdElector`
//! (candidate keys on leases) and with the provider's lease elector (any lock provider is
//! one), three candidates each on connections of its own through proxies that can be cut.
//! Needs `SHEDLOCK_TEST_ETCD_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use shedlock_conformance::election::{Candidate, Candidates, leader_handover};
use shedlock_conformance::{CutProxy, ProxyMode, upstream_of};
use shedlock_core::{ElectionConfig, Elector};
use shedlock_etcd::EtcdLockProvider;
use shedlock_runtime::LeaderElection;

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

/// `count` candidates on `url`, each through proxies of its own to every member, with
/// requests bounded by `request_timeout`.
async fn candidates(
    url: &str,
    kind: Kind,
    count: usize,
    request_timeout: Duration,
) -> Vec<(Arc<dyn Elector>, Vec<CutProxy>)> {
    let prefix = common::unique_key_prefix("election");
    let mut candidates = Vec::new();
    for who in 0..count {
        let (proxies, through) = proxies(url).await;
        let provider = EtcdLockProvider::builder(through)
            .prefix(&prefix)
            .holder(format!("candidate-{who}"))
            .request_timeout(request_timeout)
            .connect()
            .await
            .expect("connect");
        let elector: Arc<dyn Elector> = match kind {
            Kind::Keys => Arc::new(provider.elector()),
            Kind::Lease => Arc::new(provider),
        };
        candidates.push((elector, proxies));
    }
    candidates
}

async fn election(kind: Kind) {
    let Some(url) = common::etcd_url() else {
        return;
    };
    let candidates = candidates(&url, kind, 3, Duration::from_millis(500))
        .await
        .into_iter()
        .map(|(elector, proxies)| Candidate::new(elector, cut_all(proxies)))
        .collect();
    leader_handover(&format!("etcd {kind:?}"), CONFIG, candidates).await;
}

/// A leader that resigns steps down before etcd hears of it. The resigning leader's answers
/// are held back (its requests still reach etcd): its resignation hands the election over
/// while it waits for etcd's answer, and it must not still lead when the next is elected.
/// (The candidate-key elector used to revoke its lease first and step down after the answer.)
async fn resigning_leader_steps_down_first(kind: Kind) {
    let Some(url) = common::etcd_url() else {
        return;
    };
    // Requests wait long for an answer, so that a step-down left for after the answer comes
    // well after the handover.
    let (electors, mut proxies): (Vec<_>, Vec<_>) =
        candidates(&url, kind, 2, Duration::from_secs(10))
            .await
            .into_iter()
            .unzip();
    let candidates = Candidates::start("resign", CONFIG, electors);
    let first = candidates
        .next_leader(None, CONFIG.lease_duration * 2)
        .await;
    for proxy in &proxies[first] {
        proxy.set(ProxyMode::HoldAnswers);
    }
    let (_, second) = tokio::join!(
        candidates.election(first).resign(),
        candidates.next_leader(Some(first), CONFIG.lease_duration * 2),
    );
    assert!(
        candidates.revoked_at(first) < candidates.elected_at(second),
        "etcd {kind:?}: the resigning leader still led when the next was elected: {:?}",
        candidates.events()
    );
    for proxy in proxies.remove(first) {
        proxy.set(ProxyMode::Open);
    }
    candidates.resign_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elector_on_candidate_keys() {
    election(Kind::Keys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn elector_on_the_providers_leases() {
    election(Kind::Lease).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resigning_elector_on_candidate_keys_steps_down_first() {
    resigning_leader_steps_down_first(Kind::Keys).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resigning_elector_on_the_providers_leases_steps_down_first() {
    resigning_leader_steps_down_first(Kind::Lease).await;
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
