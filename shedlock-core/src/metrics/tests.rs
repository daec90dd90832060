use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;

use super::LockLabel;
use crate::{InMemoryLockProvider, LockConfiguration, LockingTaskExecutor};

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

#[test]
fn executor_events_are_counted_per_lock() {
    let recorder = PrometheusBuilder::new().build_recorder();
    let scrape = recorder.handle();
    metrics::with_local_recorder(&recorder, || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
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
    });
    let text = scrape.render();
    for expected in [
        r#"shedlock_lock_acquire_attempts_total{lock="report"} 5"#,
        r#"shedlock_lock_acquired_total{lock="report"} 4"#,
        r#"shedlock_lock_not_acquired_total{lock="report"} 1"#,
        r#"shedlock_lock_released_total{lock="report"} 4"#,
    ] {
        assert!(
            text.lines().any(|line| line == expected),
            "{expected} in:\n{text}"
        );
    }
}
