//! A rerun never overlaps a live run (issue 29 item 3), on Redis and RedLock, in real time:
//! the two scenarios of `shedlock_conformance::reruns` (a run past `lock_at_most_for`; an
//! instance cut from every server, through proxies, for longer than its run heartbeat), with
//! run heartbeats kept in the run records on Redis's clock.
//!
//! Needs `SHEDLOCK_TEST_REDIS_URL` and `SHEDLOCK_TEST_REDLOCK_URLS`; skipped without them,
//! failed without them when `CI=true`.

mod common;

use std::sync::Arc;

use common::{redis_url, redlock_urls, unique_key_prefix};
use shedlock_conformance::reruns;
use shedlock_conformance::{CutProxy, unique_lock_name, upstream_of};
use shedlock_core::LockProvider;
use shedlock_redis::{RedLockProvider, RedisLockProvider};

async fn single(url: &str, prefix: &str, holder: &str) -> Arc<dyn LockProvider> {
    let provider = RedisLockProvider::builder()
        .key_prefix(prefix)
        .holder(holder)
        .connect(url)
        .await
        .unwrap();
    Arc::new(provider)
}

async fn redlock(urls: &[String], prefix: &str, holder: &str) -> Arc<dyn LockProvider> {
    let provider = RedLockProvider::builder()
        .key_prefix(prefix)
        .holder(holder)
        .connect(urls)
        .await
        .unwrap();
    Arc::new(provider)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_lock_at_most_for_is_not_rerun_beside_itself() {
    let Some(url) = redis_url() else { return };
    let prefix = unique_key_prefix("live");
    let (a, b) = (
        single(&url, &prefix, "instance-a").await,
        single(&url, &prefix, "instance-b").await,
    );
    let lock = unique_lock_name("live");
    reruns::a_run_past_lock_at_most_for_is_not_rerun_beside_itself("Redis", &lock, a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redlock_a_run_past_lock_at_most_for_is_not_rerun_beside_itself() {
    let Some(urls) = redlock_urls() else { return };
    let prefix = unique_key_prefix("live-redlock");
    let (a, b) = (
        redlock(&urls, &prefix, "instance-a").await,
        redlock(&urls, &prefix, "instance-b").await,
    );
    let lock = unique_lock_name("live");
    reruns::a_run_past_lock_at_most_for_is_not_rerun_beside_itself("RedLock", &lock, a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_from_the_server_stops_before_it_is_rerun() {
    let Some(url) = redis_url() else { return };
    let prefix = unique_key_prefix("live-cut");
    let proxy = Arc::new(CutProxy::start(&upstream_of(&url).unwrap()).await.unwrap());
    let cut_off = single(&proxy.url_through(&url).unwrap(), &prefix, "instance-a").await;
    let other = single(&url, &prefix, "instance-b").await;
    let lock = unique_lock_name("live-cut");
    reruns::a_run_cut_from_its_store_stops_before_it_is_rerun(
        "Redis",
        &lock,
        cut_off,
        vec![proxy],
        other,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redlock_a_run_cut_from_the_masters_stops_before_it_is_rerun() {
    let Some(urls) = redlock_urls() else { return };
    let prefix = unique_key_prefix("live-cut-redlock");
    let (mut through, mut proxies) = (Vec::new(), Vec::new());
    for url in &urls {
        let proxy = Arc::new(CutProxy::start(&upstream_of(url).unwrap()).await.unwrap());
        through.push(proxy.url_through(url).unwrap());
        proxies.push(proxy);
    }
    let cut_off = redlock(&through, &prefix, "instance-a").await;
    let other = redlock(&urls, &prefix, "instance-b").await;
    let lock = unique_lock_name("live-cut");
    reruns::a_run_cut_from_its_store_stops_before_it_is_rerun(
        "RedLock", &lock, cut_off, proxies, other,
    )
    .await;
}
