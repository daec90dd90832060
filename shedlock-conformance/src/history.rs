//! Run-record scenarios beyond the conformance cases, on real leases of a real store, and
//! what the stores' own run-record tests check alike.

use std::fmt;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use crate::unique_lock_name;
use shedlock_core::{
    Error, LockConfiguration, LockProvider, Operation, RunEnd, RunLog, RunOutcome, RunQuery,
    RunStart,
};

/// A holder that stalled past its lease ends its run after `other` took the lock and marked
/// the run interrupted: the interruption stays, and the new holder's run is a record of its
/// own. `stalled` and `other` are two holders on one store that keeps run records.
///
/// # Panics
/// When the store does not behave so, or fails.
pub async fn late_end_of_a_stalled_holder(stalled: &dyn LockProvider, other: &dyn LockProvider) {
    let lock = unique_lock_name("runs-late");
    let config = LockConfiguration::new(&lock, Duration::from_millis(300), Duration::ZERO)
        .expect("valid configuration");
    let lease = stalled.acquire(&config).await.unwrap().expect("acquired");
    let log = stalled.run_log().expect("a run log");
    let first = RunStart::new(&lock, "job", None, stalled.holder(), lease.fencing_token());
    log.run_started(&first).await.unwrap();
    let taken = loop {
        // The lease ends by the store's clock; try until it has.
        if let Some(taken) = other.acquire(&config).await.unwrap() {
            break taken;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let other_log = other.run_log().expect("a run log");
    let interrupted = RunEnd::with_error(RunOutcome::Interrupted, "holder stopped renewing");
    other_log.run_finished(&first, &interrupted).await.unwrap();
    let second = RunStart::new(&lock, "job", None, other.holder(), taken.fencing_token());
    other_log.run_started(&second).await.unwrap();

    log.run_finished(&first, &RunEnd::succeeded())
        .await
        .unwrap();
    assert!(
        !stalled.release(&lease).await.unwrap(),
        "the lease was taken"
    );
    let records = log.runs(&RunQuery::lock(&lock)).await.unwrap();
    let outcomes: Vec<_> = records
        .iter()
        .map(|r| (r.fencing_token, r.outcome, r.holder.as_str()))
        .collect();
    assert_eq!(
        outcomes,
        [
            (taken.fencing_token(), RunOutcome::Running, other.holder()),
            (
                lease.fencing_token(),
                RunOutcome::Interrupted,
                stalled.holder()
            ),
        ]
    );
}

/// Writes `runs` failed runs of each of `locks` (tokens 1 to `runs`, job `import`, holder
/// `web-1`), each with an error of the longest a record keeps, eight writers at a time: the
/// history issue 29 met (2 locks x 1000 runs is over 4 MiB of records).
///
/// # Panics
/// When the store fails.
pub async fn write_failed_runs(log: Arc<dyn RunLog>, locks: &[&str], runs: u64) {
    const WRITERS: usize = 8;
    let error: Arc<str> = "x".repeat(shedlock_core::MAX_ERROR_LEN).into();
    let all: Arc<[(String, u64)]> = locks
        .iter()
        .flat_map(|lock| (1..=runs).map(move |token| ((*lock).to_owned(), token)))
        .collect();
    let mut writers = tokio::task::JoinSet::new();
    for writer in 0..WRITERS {
        let (log, error, all) = (Arc::clone(&log), Arc::clone(&error), Arc::clone(&all));
        writers.spawn(async move {
            for (lock, token) in all.iter().skip(writer).step_by(WRITERS) {
                let start = RunStart::new(lock, "import", None, "web-1", *token);
                log.run_started(&start).await.expect("record a start");
                let end = RunEnd::with_error(RunOutcome::Failed, &*error);
                log.run_finished(&start, &end).await.expect("record an end");
            }
        });
    }
    while let Some(written) = writers.join_next().await {
        written.expect("a writer");
    }
}

/// Records an ended run (no start) of `lock` with each token of `tokens`, in order.
///
/// # Panics
/// When the store fails.
pub async fn end_runs(log: &dyn RunLog, lock: &str, tokens: RangeInclusive<u64>) {
    for token in tokens {
        let start = RunStart::new(lock, "job", None, "a", token);
        log.run_finished(&start, &RunEnd::succeeded())
            .await
            .expect("run_finished");
    }
}

/// The tokens of `lock`'s records, newest first.
///
/// # Panics
/// When the store fails.
pub async fn run_tokens(log: &dyn RunLog, lock: &str) -> Vec<u64> {
    let records = log.runs(&RunQuery::lock(lock)).await.expect("runs");
    records.iter().map(|r| r.fencing_token).collect()
}

/// Asserts that `result` is the [`Error::Store`] of a run-record operation on `lock` whose
/// message names every one of `names` (the key or node of a corrupt record).
///
/// # Panics
/// When it is not.
pub fn assert_runs_error<T: fmt::Debug>(result: Result<T, Error>, lock: &str, names: &[&str]) {
    match result {
        Err(Error::Store {
            operation: Operation::Runs,
            lock_name,
            source,
        }) => {
            assert_eq!(lock_name, lock);
            let message = source.to_string();
            let missing = names.iter().find(|name| !message.contains(*name));
            assert!(missing.is_none(), "{missing:?} not in: {message}");
        }
        other => panic!("expected a run-record store error, got {other:?}"),
    }
}
