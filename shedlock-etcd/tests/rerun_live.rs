//! A rerun never overlaps a live run (issue 29 item 3) on etcd, in real time: the two
//! scenarios of `shedlock_conformance::reruns` (a run past `lock_at_most_for`; an instance
//! cut from the cluster, through a proxy, for longer than its run heartbeat), with run
//! heartbeats on etcd leases (etcd keeps a heartbeat key at least 2 s, its shortest TTL, after
//! each renewal; the runner stops at its own, earlier deadline).
//!
//! Needs `SHEDLOCK_TEST_ETCD_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use shedlock_conformance::reruns;
use shedlock_conformance::{CutProxy, unique_key_prefix, unique_lock_name, upstream_of, url_at};
use shedlock_core::LockProvider;
use shedlock_etcd::EtcdLockProvider;

/// An instance `holder` on the test cluster under `prefix`, through `endpoints`.
async fn instance(endpoints: &str, prefix: &str, holder: &str) -> Arc<dyn LockProvider> {
    let provider = EtcdLockProvider::builder(endpoints)
        .prefix(prefix)
        .holder(holder)
        .request_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect");
    Arc::new(provider)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_lock_at_most_for_is_not_rerun_beside_itself() {
    let Some(url) = common::etcd_url() else {
        return;
    };
    let prefix = unique_key_prefix("rerun-live");
    let (a, b) = (
        instance(&url, &prefix, "instance-a").await,
        instance(&url, &prefix, "instance-b").await,
    );
    let lock = unique_lock_name("live");
    reruns::a_run_past_lock_at_most_for_is_not_rerun_beside_itself("etcd", &lock, a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_from_its_cluster_stops_before_it_is_rerun() {
    let Some(url) = common::etcd_url() else {
        return;
    };
    let member = url
        .split(',')
        .next()
        .expect("an endpoint")
        .trim()
        .to_owned();
    let proxy = Arc::new(
        CutProxy::start(&upstream_of(&member).expect("a member's address"))
            .await
            .unwrap(),
    );
    let prefix = unique_key_prefix("rerun-cut");
    let through = url_at(&member, proxy.addr()).unwrap();
    let cut_off = instance(&through, &prefix, "instance-a").await;
    let other = instance(&url, &prefix, "instance-b").await;
    let lock = unique_lock_name("live-cut");
    reruns::a_run_cut_from_its_store_stops_before_it_is_rerun(
        "etcd",
        &lock,
        cut_off,
        vec![proxy],
        other,
    )
    .await;
}
