//! A release cut by a store failure is tried again in the background while the lease may still
//! be this holder's, so a store back from an outage frees the lock at once, not when the lease
//! runs out. Paused clock, an in-memory store behind a connection the test cuts.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Cuttable, tokio_store};
use shedlock_core::{Error, LockConfiguration, LockProvider};
use shedlock_runtime::{LockEvent, LockingTaskExecutor, TaskResult};

/// The lease is a minute: long enough that "the lock was free again" can only come from a
/// retried release, never from the lease running out.
fn lock() -> LockConfiguration {
    LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO).unwrap()
}

/// Instance `a` behind a connection the test cuts, instance `b` straight on the store, and the
/// release events of `a` (`"released"`, `"release-failed"`).
fn instances() -> (
    LockingTaskExecutor,
    Arc<AtomicBool>,
    Cuttable,
    Arc<Mutex<Vec<&'static str>>>,
) {
    let store = tokio_store();
    let cut = Arc::new(AtomicBool::new(false));
    let a = Cuttable {
        inner: store.with_holder("a"),
        cut: Arc::clone(&cut),
    };
    let events: Arc<Mutex<Vec<&'static str>>> = Arc::default();
    let seen = Arc::clone(&events);
    let executor = LockingTaskExecutor::new(a).with_listener(move |event: &LockEvent<'_>| {
        let kind = match event {
            LockEvent::Released(_) => "released",
            LockEvent::ReleaseFailed { .. } => "release-failed",
            _ => return,
        };
        seen.lock().unwrap().push(kind);
    });
    let b = Cuttable {
        inner: store.with_holder("b"),
        cut: Arc::default(),
    };
    (executor, cut, b, events)
}

/// Asks for the lock as `b` every 100 ms, at most `attempts` times; whether it was granted.
async fn b_gets_it(b: &Cuttable, attempts: u32) -> bool {
    for _ in 0..attempts {
        if let Some(lease) = b.acquire(&lock()).await.unwrap() {
            assert!(b.release(&lease).await.unwrap());
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test(start_paused = true)]
async fn a_release_cut_by_an_outage_goes_through_once_the_store_is_back() {
    let (executor, cut, b, events) = instances();
    let outcome = executor
        .execute(&lock(), async {
            // The store goes away while the job runs: its release is cut.
            cut.store(true, Ordering::SeqCst);
        })
        .await
        .unwrap();
    assert_eq!(outcome, TaskResult::Executed(()));
    assert_eq!(*events.lock().unwrap(), ["release-failed"]);
    // Down for 5 s: the retries fail quietly (no event each).
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        !b_gets_it(&b, 1).await,
        "a still holds it while the store is down for it"
    );
    assert_eq!(*events.lock().unwrap(), ["release-failed"]);

    cut.store(false, Ordering::SeqCst);
    // Without the retry the lock stays taken for the rest of the minute: 3 s is far less.
    assert!(
        b_gets_it(&b, 30).await,
        "the lock of the release the outage cut was not freed when the store came back"
    );
    assert_eq!(*events.lock().unwrap(), ["release-failed", "released"]);
}

#[tokio::test(start_paused = true)]
async fn a_dropped_handle_whose_release_was_cut_is_released_on_a_retry() {
    let (executor, cut, b, events) = instances();
    let held = executor.try_lock(&lock()).await.unwrap().expect("free");
    cut.store(true, Ordering::SeqCst);
    drop(held);
    tokio::time::sleep(Duration::from_secs(2)).await;
    cut.store(false, Ordering::SeqCst);
    assert!(b_gets_it(&b, 30).await);
    assert_eq!(*events.lock().unwrap(), ["release-failed", "released"]);
}

#[tokio::test(start_paused = true)]
async fn retries_stop_when_the_lease_is_no_longer_ours() {
    let (executor, cut, b, events) = instances();
    let short = LockConfiguration::new("report", Duration::from_secs(2), Duration::ZERO).unwrap();
    let held = executor.try_lock(&short).await.unwrap().expect("free");
    cut.store(true, Ordering::SeqCst);
    let refused = held.release().await;
    assert!(matches!(refused, Err(Error::Store { .. })), "{refused:?}");
    // The store stays away past the lease; then `b` takes the lock.
    tokio::time::sleep(Duration::from_secs(3)).await;
    cut.store(false, Ordering::SeqCst);
    let taken = b.acquire(&lock()).await.unwrap().expect("expired");
    // No retry releases `b`'s lease (they stopped at `a`'s deadline, and would be refused).
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        b.extend(&taken, Duration::from_secs(60), Duration::ZERO)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(*events.lock().unwrap(), ["release-failed"]);
}

#[tokio::test(start_paused = true)]
async fn a_release_the_store_refuses_is_not_retried() {
    let (executor, _cut, b, events) = instances();
    let short = LockConfiguration::new("report", Duration::from_secs(2), Duration::ZERO).unwrap();
    let held = executor.try_lock(&short).await.unwrap().expect("free");
    // Expired and taken over: the release is refused, as "not ours".
    tokio::time::sleep(Duration::from_secs(3)).await;
    let taken = b.acquire(&lock()).await.unwrap().expect("expired");
    assert!(matches!(held.release().await, Err(Error::LockLost { .. })));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(
        b.extend(&taken, Duration::from_secs(60), Duration::ZERO)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(*events.lock().unwrap(), ["release-failed"]);
}
