//! A month of a 200-job fleet's run history on the real ensemble
//! (`shedlock_conformance::longevity`), against a day of it: what ZooKeeper keeps,
//! counted in the ensemble itself (run nodes per lock directory, directories), stays within the
//! provider's bounds, and the figures line is printed. Needs `SHEDLOCK_TEST_ZK_URL`; skipped
//! without it, failed without it when `CI=true`.

mod common;

use std::time::Duration;

use shedlock_conformance::longevity::{Figures, LOCKS, month_of_history};
use shedlock_conformance::unique_lock_name;
use shedlock_core::{RUN_TRIM_SLACK, RunEnd, RunLog, RunStart};

use common::RunsOn;

/// Writes `days` of history on a root of its own and checks the nodes kept there.
async fn history(days: u32) -> Option<Figures> {
    let harness = RunsOn::new(common::provider("longevity").await?, false);
    let figures = month_of_history(&harness, days).await;
    println!("ZooKeeper, {figures}");
    let client = common::raw_client().await;
    let runs = format!("{}/runs", harness.zk().root());
    let dirs = client.list_children(&runs).await.expect("list the runs");
    // The fleet's locks and the marker: one directory each, nothing else.
    assert_eq!(dirs.len(), LOCKS + 1, "lock directories");
    let mut nodes = 0;
    for dir in &dirs {
        let (kept, _) = common::run_nodes(&client, harness.zk().root(), dir).await;
        assert!(
            kept <= figures.bound_per_lock,
            "{dir} holds {kept} run nodes, past {}",
            figures.bound_per_lock
        );
        nodes += kept;
    }
    // The marker's run, and the fleet's records as read back through the provider.
    assert_eq!(nodes, figures.kept + 1, "run nodes in ZooKeeper");
    println!(
        "ZooKeeper, {days} day(s): {nodes} run nodes in {} lock directories",
        dirs.len()
    );
    Some(figures)
}

/// A day and a month keep the same bounds: what is kept per lock does not grow with history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_of_history_stays_within_the_bounds() {
    let Some(day) = history(1).await else {
        return;
    };
    let Some(month) = history(30).await else {
        return;
    };
    assert!(month.most_per_lock <= month.bound_per_lock);
    assert!(month.kept <= LOCKS * month.bound_per_lock);
    assert!(day.kept <= month.kept);
}

/// Past the retention, a month-old fleet's directories go too: a sweep deletes every lock's
/// aged runs and the emptied directories, reading one small node per lock to find them.
#[tokio::test]
async fn aged_runs_of_many_idle_locks_go_with_their_directories() {
    let Some(provider) = common::provider("longevity-age").await else {
        return;
    };
    let harness = RunsOn::new(provider, false);
    let retention = Duration::from_millis(500);
    let log = harness.keeping(retention, 1000).await;
    let prefix = unique_lock_name("idle");
    for i in 0..50 {
        let start = RunStart::new(format!("{prefix}-{i}"), "job", None, "a", 1);
        log.run_finished(&start, &RunEnd::succeeded())
            .await
            .unwrap();
    }
    tokio::time::sleep(retention * 2).await;
    let busy = unique_lock_name("busy");
    for token in 1..=u64::from(RUN_TRIM_SLACK) {
        let start = RunStart::new(&busy, "job", None, "a", token);
        log.run_finished(&start, &RunEnd::succeeded())
            .await
            .unwrap();
    }
    let client = common::raw_client().await;
    let runs = format!("{}/runs", harness.zk().root());
    let dirs = client.list_children(&runs).await.expect("list the runs");
    assert_eq!(dirs, [busy], "only the busy lock's directory is left");
}
