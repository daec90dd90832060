use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;

use super::LockLabel;
use crate::{LeaderElection, LockingTaskExecutor};
use shedlock_core::{InMemoryLockProvider, LeaderState, LockConfiguration};

#[test]
fn lock_labels_keep_map_or_omit_the_name() {
    assert_eq!(
        LockLabel::Name.value("invoice-7").as_deref(),
        Some("invoice-7")
    );
    let family = LockLabel::map(|name| name.split('-').next().unwrap_or(name).to_owned());
    assert_eq!(family.value("invoice-7").as_deref(), Some("invoice"));
    assert_eq!(LockLabel::Omit.value("invoice-7"), None);
}

/// Runs `work` on a current-thread runtime with a Prometheus recorder of its own (so tests do
/// not share one); the scrape afterwards.
fn scraped<F: Future<Output = ()>>(work: impl FnOnce() -> F) -> String {
    let recorder = PrometheusBuilder::new().build_recorder();
    let scrape = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(work())
    });
    scrape.render()
}

fn assert_samples(text: &str, expected: &[&str]) {
    for sample in expected {
        assert!(
            text.lines().any(|line| line == *sample),
            "{sample} in:\n{text}"
        );
    }
}

#[test]
fn executor_events_are_counted_per_lock() {
    let text = scraped(|| async {
        let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
        let config =
            LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO).unwrap();
        for _ in 0..3 {
            let _ = executor.execute(&config, async {}).await.unwrap();
        }
        let held = executor.try_lock(&config).await.unwrap().unwrap();
        let _ = executor.execute(&config, async {}).await.unwrap();
        held.release().await.unwrap();
    });
    assert_samples(
        &text,
        &[
            r#"shedlock_lock_acquire_attempts_total{lock="report"} 5"#,
            r#"shedlock_lock_acquired_total{lock="report"} 4"#,
            r#"shedlock_lock_not_acquired_total{lock="report"} 1"#,
            r#"shedlock_lock_released_total{lock="report"} 4"#,
        ],
    );
}

#[test]
fn elections_report_leadership_terms_and_handovers() {
    let text = scraped(|| async {
        let election = LeaderElection::builder("batch", InMemoryLockProvider::new())
            .start()
            .unwrap();
        let mut state = election.subscribe();
        state
            .wait_for(|s| matches!(s, LeaderState::Leader { .. }))
            .await
            .unwrap();
        election.resign().await;
    });
    assert_samples(
        &text,
        &[
            r#"shedlock_election_leader{election="batch"} 0"#,
            r#"shedlock_election_terms_total{election="batch"} 1"#,
            r#"shedlock_election_handovers_total{election="batch"} 1"#,
        ],
    );
}
