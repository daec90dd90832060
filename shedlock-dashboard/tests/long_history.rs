//! The dashboard over a real store with a long history (issue 29, item 1 as the dashboard met
//! it): on etcd, two locks with 1000 failed runs each (the default `runs_per_lock`, errors of
//! the longest kept: over 4 MiB together) made the whole page answer 503. Each lock's runs are
//! now read with the lock and a limit: the page answers, small, with both locks' latest runs,
//! and a lock's older runs are a page away. Skipped without `SHEDLOCK_TEST_ETCD_URL`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use shedlock_conformance::unique_key_prefix;
use shedlock_core::{LockConfiguration, LockProvider};
use shedlock_dashboard::{DashboardOptions, router};
use shedlock_etcd::EtcdLockProvider;
use shedlock_runtime::LockingTaskExecutor;
use shedlock_test_support::etcd_url;

use common::get;

const RUNS: u64 = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_with_two_locks_of_a_thousand_failures() {
    let Some(url) = etcd_url() else { return };
    let prefix = format!("{}/", unique_key_prefix("dash_long").trim_end_matches(':'));
    let etcd = Arc::new(
        EtcdLockProvider::builder(&url)
            .prefix(prefix)
            .connect()
            .await
            .unwrap(),
    );
    let provider: Arc<dyn LockProvider> = etcd.clone();
    let executor = LockingTaskExecutor::from_shared(Arc::clone(&provider));
    for name in ["failing-a", "failing-b"] {
        let config = LockConfiguration::new(name, Duration::from_secs(60), Duration::ZERO).unwrap();
        executor
            .try_lock(&config)
            .await
            .unwrap()
            .unwrap()
            .release()
            .await
            .unwrap();
    }
    shedlock_conformance::history::write_failed_runs(etcd, &["failing-a", "failing-b"], RUNS).await;

    let app = router(Arc::clone(&provider), DashboardOptions::new());
    let started = std::time::Instant::now();
    let (status, page) = get(&app, "/?view=locks").await;
    // A figure, not a bound: the machine may be slow.
    eprintln!(
        "etcd, 2 x {RUNS} failed runs: page {} bytes in {:?}",
        page.len(),
        started.elapsed()
    );
    assert_eq!(status, StatusCode::OK, "{page}");
    assert!(page.len() < 500 * 1024, "{} bytes", page.len());
    for lock in ["failing-a", "failing-b"] {
        let rows = format!(r#"<tr class="run failed" data-lock="{lock}">"#);
        assert_eq!(page.matches(&rows).count(), 5, "{lock}'s latest runs");
    }
    assert!(!page.contains(&"x".repeat(200)), "errors are cut short");
    let (status, history) = get(&app, "/?lock=failing-a").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(history.matches(r#"<tr class="run failed""#).count(), 50);
    assert!(
        history.contains(r#"<a id="older""#),
        "older runs a page away"
    );
}
