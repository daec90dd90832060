//! Nested executions: re-entrant only for the same lock name from the same store, and only
//! while the enclosing lease is trusted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shedlock_core::{Error, InMemoryLockProvider, LockConfiguration, LockProvider};
use shedlock_runtime::{LockContext, LockEvent, LockingTaskExecutor, TaskResult};

fn report(at_most: Duration) -> LockConfiguration {
    LockConfiguration::new("report", at_most, Duration::ZERO).unwrap()
}

/// An executor over `store` that writes down its lock events.
fn recorded(store: InMemoryLockProvider) -> (LockingTaskExecutor, Arc<Mutex<Vec<String>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    let executor = LockingTaskExecutor::new(store).with_listener(move |event: &LockEvent<'_>| {
        // Attempts precede every outcome (`executor.rs`); the outcomes tell these cases apart.
        if !matches!(event, LockEvent::Attempt { .. }) {
            sink.lock().unwrap().push(event.to_string());
        }
    });
    (executor, events)
}

/// What `task` gave, run under `config` on `inner` inside a run under the same `config` on
/// `outer`.
async fn nested<F: Future>(
    outer: &LockingTaskExecutor,
    inner: &LockingTaskExecutor,
    config: &LockConfiguration,
    task: F,
) -> Result<TaskResult<F::Output>, Error> {
    outer
        .execute(config, inner.execute(config, task))
        .await
        .unwrap()
        .into_executed()
        .unwrap()
}

fn kinds(events: &Mutex<Vec<String>>) -> Vec<String> {
    let events = events.lock().unwrap();
    events
        .iter()
        .map(|e| e.split(' ').take(2).collect::<Vec<_>>().join(" "))
        .collect()
}

#[tokio::test]
async fn the_same_name_on_another_store_takes_that_stores_lock() {
    let (a, _) = recorded(InMemoryLockProvider::new().with_holder("me"));
    let store_b = InMemoryLockProvider::new();
    let (b, b_events) = recorded(store_b.with_holder("me"));
    let config = report(Duration::from_secs(60));

    let inner = nested(&a, &b, &config, async {
        // Held in store B while it runs: another holder there is refused.
        let rival = store_b.with_holder("rival").acquire(&config).await.unwrap();
        (
            rival.is_none(),
            LockContext::current().unwrap().fencing_token(),
        )
    })
    .await;
    assert_eq!(inner.unwrap(), TaskResult::Executed((true, 1)));
    assert_eq!(
        kinds(&b_events),
        ["acquired `report`", "released `report`"],
        "the nested run took and gave back store B's lock"
    );

    // Held by someone else in store B: the nested run is skipped, not run on A's lease.
    let rival = store_b
        .with_holder("rival")
        .acquire(&config)
        .await
        .unwrap()
        .expect("free");
    let ran = AtomicBool::new(false);
    let nested = nested(&a, &b, &config, async { ran.store(true, Ordering::SeqCst) }).await;
    assert_eq!(nested.unwrap(), TaskResult::Skipped);
    assert!(!ran.load(Ordering::SeqCst), "ran without store B's lock");
    store_b.with_holder("rival").release(&rival).await.unwrap();
}

#[tokio::test]
async fn clones_shared_providers_and_listeners_are_the_same_store() {
    let shared: Arc<dyn LockProvider> = Arc::new(InMemoryLockProvider::new().with_holder("me"));
    let events = Arc::new(Mutex::new(Vec::new()));
    let sink = Arc::clone(&events);
    let first = LockingTaskExecutor::from_shared(Arc::clone(&shared)).with_listener(
        move |event: &LockEvent<'_>| {
            if !matches!(event, LockEvent::Attempt { .. }) {
                sink.lock().unwrap().push(event.to_string());
            }
        },
    );
    let second =
        LockingTaskExecutor::from_shared(Arc::clone(&shared)).with_listener(|_: &LockEvent<'_>| {});
    let other = LockingTaskExecutor::new(InMemoryLockProvider::new().with_holder("me"));
    let config = report(Duration::from_secs(60));

    let runs = first
        .execute(&config, async {
            let clone = first.clone().execute(&config, async {}).await.unwrap();
            let shared = second.execute(&config, async {}).await.unwrap();
            // Another store in between does not hide the outer lock of the first store.
            let through_other = other
                .execute(&config, async {
                    first.execute(&config, async {}).await.unwrap()
                })
                .await
                .unwrap();
            (clone, shared, through_other)
        })
        .await
        .unwrap()
        .into_executed()
        .unwrap();
    assert_eq!(
        runs,
        (
            TaskResult::Executed(()),
            TaskResult::Executed(()),
            TaskResult::Executed(TaskResult::Executed(()))
        )
    );
    assert_eq!(
        kinds(&events),
        ["acquired `report`", "released `report`"],
        "re-entrant runs on the same store do not acquire again"
    );
}

#[tokio::test]
async fn two_providers_over_one_store_are_not_the_same_store() {
    let store = InMemoryLockProvider::new().with_holder("me");
    let (a, b) = (
        LockingTaskExecutor::new(store.clone()),
        LockingTaskExecutor::new(store),
    );
    let config = report(Duration::from_secs(60));
    let nested = nested(&a, &b, &config, async { panic!("ran without its lock") }).await;
    assert_eq!(nested.unwrap(), TaskResult::Skipped);
}

#[tokio::test(start_paused = true)]
async fn a_nested_run_inside_a_lost_lease_does_not_run() {
    let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    let other_store = LockingTaskExecutor::new(InMemoryLockProvider::new());
    let config = report(Duration::from_secs(5));
    let ran = AtomicBool::new(false);
    let (nested, elsewhere) = executor
        .execute(&config, async {
            // Past the lease's local deadline, without keep-alive: another instance may hold it.
            tokio::time::sleep(Duration::from_secs(6)).await;
            let nested = executor
                .execute(&config, async { ran.store(true, Ordering::SeqCst) })
                .await;
            let elsewhere = other_store.execute(&config, async {}).await;
            (nested, elsewhere)
        })
        .await
        .unwrap()
        .into_executed()
        .unwrap();
    assert!(
        matches!(&nested, Err(Error::LockLost { lock_name }) if lock_name == "report"),
        "{nested:?}"
    );
    assert!(!ran.load(Ordering::SeqCst), "ran on a lost lease");
    assert_eq!(
        elsewhere.unwrap(),
        TaskResult::Executed(()),
        "another store's lock is taken normally"
    );
}
