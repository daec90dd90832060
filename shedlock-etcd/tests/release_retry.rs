//! A release cut by an outage goes through once the cluster is back, long before the lease
//! would have run out: the executor retries it. The test cluster, reached by one instance
//! through a proxy that cuts every connection; skipped without SHEDLOCK_TEST_ETCD_URL, failed
//! without it when `CI=true`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use shedlock_conformance::{CutProxy, ProxyMode};
use shedlock_core::{LockConfiguration, LockProvider};
use shedlock_etcd::EtcdLockProvider;
use shedlock_runtime::{LockEvent, LockingTaskExecutor, TaskResult};

async fn provider_at(endpoints: String, prefix: &str, holder: &str) -> EtcdLockProvider {
    EtcdLockProvider::builder(endpoints)
        .prefix(prefix)
        .holder(holder)
        .request_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect to the test cluster")
}

#[tokio::test]
async fn a_release_cut_by_an_outage_frees_the_lock_when_the_cluster_is_back() {
    let Some(url) = common::etcd_url() else {
        return;
    };
    let first = url.split(',').next().unwrap();
    let proxy = CutProxy::start(first.trim_start_matches("http://"))
        .await
        .unwrap();
    let prefix = common::unique_key_prefix("release-retry");
    // `a` reaches the cluster only through the proxy: cut, the cluster is gone for it.
    let a = provider_at(format!("http://{}", proxy.addr()), &prefix, "a").await;
    let b = provider_at(url.clone(), &prefix, "b").await;
    let released = Arc::new(tokio::sync::Notify::new());
    let signal = Arc::clone(&released);
    let executor = LockingTaskExecutor::new(a).with_listener(move |event: &LockEvent<'_>| {
        if let LockEvent::Released(_) = event {
            signal.notify_one();
        }
    });
    // A minute's lease: freed sooner only by a release.
    let lock = LockConfiguration::new("cut", Duration::from_secs(60), Duration::ZERO).unwrap();

    let outcome = executor
        .execute(&lock, async { proxy.set(ProxyMode::Reset) })
        .await
        .unwrap();
    assert_eq!(outcome, TaskResult::Executed(()));
    assert!(
        b.acquire(&lock).await.unwrap().is_none(),
        "the release went through the cut"
    );

    proxy.set(ProxyMode::Open);
    // Without the retry no release comes: the lease would simply run out after the minute.
    tokio::time::timeout(Duration::from_secs(30), released.notified())
        .await
        .expect("the release cut by the outage was not retried once the cluster was back");
    let lease = b
        .acquire(&lock)
        .await
        .unwrap()
        .expect("free again, within the minute's lease");
    assert!(b.release(&lease).await.unwrap());
}
