//! A lease at its edges: keep-alive intervals, an extension answered late, an extension in
//! flight when the task ends, a lock context kept past its execution. Paused clock.

mod common;

use std::time::Duration;

use common::Slow;
use shedlock_core::{Error, LockConfiguration};
use shedlock_runtime::{
    Job, JobLock, LockContext, LockingTaskExecutor, Schedule, SchedulerConfig, TaskResult,
};

const S: fn(u64) -> Duration = Duration::from_secs;

use common::tokio_store as store;

/// The executors of two instances, `a` and `b`, on one store.
fn two_instances() -> (LockingTaskExecutor, LockingTaskExecutor) {
    let store = store();
    (
        LockingTaskExecutor::new(store.with_holder("a")),
        LockingTaskExecutor::new(store.with_holder("b")),
    )
}

fn lock(at_most: Duration, at_least: Duration) -> LockConfiguration {
    LockConfiguration::new("job", at_most, at_least).unwrap()
}

fn keep_alive_field<T: std::fmt::Debug>(result: Result<T, Error>) -> (&'static str, String) {
    match result {
        Err(Error::InvalidConfig { field, message }) => (field, message),
        other => panic!("expected InvalidConfig, got {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn keep_alive_intervals_longer_than_half_the_lease_are_refused_everywhere() {
    let executor = LockingTaskExecutor::new(store());
    let refused = executor
        .execute_with_keep_alive(&lock(S(10), S(0)), Duration::from_millis(5_001), async {})
        .await;
    assert_eq!(keep_alive_field(refused).0, "keep_alive_interval");

    let config = SchedulerConfig {
        keep_alive_interval: Some(S(301)),
        ..SchedulerConfig::default() // default_lock_at_most_for: 10 minutes
    };
    assert_eq!(keep_alive_field(config.validate()).0, "keep_alive_interval");

    let config = SchedulerConfig {
        keep_alive: true,
        keep_alive_interval: Some(S(6)),
        ..SchedulerConfig::default()
    };
    config.validate().unwrap();
    let job = Job::new("long", Schedule::fixed_rate(S(60)).unwrap(), |()| async {}).with_lock(
        JobLock::new("long")
            .unwrap()
            .lock_at_most_for(S(10))
            .unwrap(),
    );
    let (field, message) = keep_alive_field(job.validate(&config));
    assert_eq!(field, "keep_alive_interval");
    assert!(message.contains("job `long`"), "{message}");
}

/// Runs `task` under a lock for `at_most`, kept alive every `interval`: when it ends, the lock
/// is still held against another instance and the lease was never lost.
async fn assert_kept_alive(at_most: Duration, interval: Duration, task: impl Future<Output = ()>) {
    let (a, b) = two_instances();
    let config = lock(at_most, S(0));
    let lost = a
        .execute_with_keep_alive(&config, interval, async {
            task.await;
            assert!(b.try_lock(&config).await.unwrap().is_none(), "lapsed");
            LockContext::current().unwrap().is_lost()
        })
        .await
        .unwrap();
    assert_eq!(lost, TaskResult::Executed(false));
}

#[tokio::test(start_paused = true)]
async fn half_the_lease_keeps_a_long_run_alive() {
    assert_kept_alive(S(10), S(5), tokio::time::sleep(S(30))).await;
}

#[tokio::test(start_paused = true)]
async fn keep_alive_follows_a_lease_the_task_shortened() {
    assert_kept_alive(S(60), S(20), async {
        let ctx = LockContext::current().unwrap();
        tokio::time::sleep(S(1)).await;
        ctx.extend(S(4), S(0)).await.unwrap();
        tokio::time::sleep(S(29)).await;
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn an_extension_confirmed_after_its_deadline_is_not_trusted() {
    let slow = Slow {
        extend_answer: S(6),
        ..Slow::new(store())
    };
    let executor = LockingTaskExecutor::new(slow);
    let config = lock(S(60), S(0));
    let (extended, lost) = executor
        .execute(&config, async {
            let ctx = LockContext::current().unwrap();
            // The store applies it at once; its answer arrives after the 5-second lease ends.
            let extended = ctx.extend(S(5), S(0)).await;
            (extended, ctx.is_lost())
        })
        .await
        .unwrap()
        .into_executed()
        .unwrap();
    assert!(
        matches!(extended, Err(Error::LockLost { .. })),
        "{extended:?}"
    );
    assert!(lost);

    let handle = executor.try_lock(&config).await.unwrap().expect("free");
    let extended = handle.extend(S(5), S(0)).await.unwrap();
    assert!(extended.is_none(), "a handle past its local deadline");
}

#[tokio::test(start_paused = true)]
async fn the_release_waits_for_an_extension_in_flight() {
    let slow = Slow {
        extend_answer: S(2),
        ..Slow::new(store())
    };
    let journal = slow.clone();
    let executor = LockingTaskExecutor::new(slow);
    let config = lock(S(10), S(0));
    // Keep-alive extends at 5 s; the task ends at 6 s, before the answer (at 7 s).
    let outcome = executor
        .execute_with_keep_alive(&config, S(5), tokio::time::sleep(S(6)))
        .await
        .unwrap();
    assert!(outcome.was_executed());
    assert_eq!(
        journal.journal(),
        ["extend sent", "extend answered", "release"],
        "a release sent before the extension's answer can be overtaken by it"
    );
}

#[tokio::test(start_paused = true)]
async fn a_context_kept_past_its_execution_cannot_extend_the_lock() {
    let (a, b) = two_instances();
    // lock_at_least_for keeps the row live after the release: a stale extension would succeed.
    let config = lock(S(600), S(30));
    let kept = a
        .execute(&config, async { LockContext::current().unwrap() })
        .await
        .unwrap()
        .into_executed()
        .unwrap();
    let extended = kept.extend(S(600), S(0)).await;
    assert!(
        matches!(extended, Err(Error::LockLost { .. })),
        "{extended:?}"
    );
    tokio::time::sleep(S(31)).await;
    assert!(
        b.try_lock(&config).await.unwrap().is_some(),
        "the lock is free after lock_at_least_for"
    );
}
