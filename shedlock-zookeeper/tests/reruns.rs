//! Issue 29, item 3 on the real ensemble: a rerun never runs a tick beside its live run. The
//! two scenarios of `shedlock_conformance::reruns`: a run past `lock_at_most_for`, and an
//! instance cut from the ensemble (through a proxy) for longer than its run heartbeat.
//!
//! Needs `SHEDLOCK_TEST_ZK_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use shedlock_conformance::CutProxy;
use shedlock_conformance::reruns;
use shedlock_conformance::unique_lock_name;
use shedlock_zookeeper::ZkLockProvider;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_lock_at_most_for_is_not_run_again_beside_itself() {
    let Some(provider) = common::provider("rerun-long").await else {
        return;
    };
    let lock = unique_lock_name("long");
    reruns::a_run_past_lock_at_most_for_is_not_rerun_beside_itself(
        "ZooKeeper",
        &lock,
        Arc::new(provider.with_holder("a").unwrap()),
        Arc::new(provider.with_holder("b").unwrap()),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_from_the_ensemble_stops_before_it_is_run_again() {
    let Some(provider) = common::provider("rerun-cut").await else {
        return;
    };
    let upstream = common::zk_url().unwrap();
    let upstream = upstream.split(',').next().unwrap().to_owned();
    let proxy = Arc::new(CutProxy::start(&upstream).await.unwrap());
    let cut_off = ZkLockProvider::builder(proxy.addr().to_string())
        .root(provider.root())
        .holder("a")
        .request_timeout(Duration::from_millis(800))
        .connect()
        .await
        .unwrap();
    let lock = unique_lock_name("cut");
    reruns::a_run_cut_from_its_store_stops_before_it_is_rerun(
        "ZooKeeper",
        &lock,
        Arc::new(cut_off),
        vec![proxy],
        Arc::new(provider.with_holder("b").unwrap()),
    )
    .await;
}
