//! Run records on the test cluster with a fleet's history: reads stay within gRPC's message
//! limit and the limit asked, and a month of history stays within the settings. Needs
//! `SHEDLOCK_TEST_ETCD_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::sync::Arc;

use shedlock_conformance::unique_lock_name;
use shedlock_core::{MAX_ERROR_LEN, RunLog, RunQuery};

/// Item 1 of issue 29: `runs()` read every record under the prefix in one range and cut to the
/// limit afterwards, so two locks with 1000 failed runs each (the default `runs_per_lock`,
/// errors of the longest kept) failed every read: "decoded message length too large: 4473817
/// bytes". Now every read is answered, in pages, whatever the history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_locks_with_a_thousand_failed_runs_each_read_back() {
    const RUNS: u64 = 1000;
    let Some(provider) = common::provider("runs-thousand").await else {
        return;
    };
    let log: Arc<dyn RunLog> = Arc::new(provider);
    let locks = [unique_lock_name("failing-a"), unique_lock_name("failing-b")];
    let names = [locks[0].as_str(), locks[1].as_str()];
    shedlock_conformance::history::write_failed_runs(Arc::clone(&log), &names, RUNS).await;

    let page = log
        .runs(&RunQuery::lock(&locks[0]).limit(50))
        .await
        .expect("a page of one lock");
    assert_eq!(page.len(), 50);
    assert_eq!(page[0].fencing_token, RUNS, "newest first");
    assert_eq!(page[0].error.as_ref().map(String::len), Some(MAX_ERROR_LEN));
    let whole = log
        .runs(&RunQuery::lock(&locks[1]))
        .await
        .expect("all of one lock");
    assert_eq!(whole.len(), RUNS as usize);
    // The oldest start of the lock, not its first token's: eight writers race, and on a loaded
    // machine a later token can start before token 1 does.
    let since = whole
        .iter()
        .map(|record| record.started_at)
        .min()
        .expect("records");
    let across = log
        .runs(&RunQuery::all().since(since).limit(100))
        .await
        .expect("a page across locks");
    assert_eq!(across.len(), 100);
    assert!(across.windows(2).all(|w| w[0].cursor() > w[1].cursor()));
    let everything = log
        .runs(&RunQuery::all().since(since))
        .await
        .expect("everything across locks");
    assert!(everything.len() >= RUNS as usize, "{}", everything.len());
}
