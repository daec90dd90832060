//! The locking executor: release on every path, re-entrancy, the task-local context, events.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use shedlock_core::{Error, InMemoryLockProvider, LockConfiguration, ManualClock};
use shedlock_runtime::{LockContext, LockEvent, LockingTaskExecutor, TaskResult};
use tokio::sync::Notify;

fn config(name: &str, at_most: u64, at_least: u64) -> LockConfiguration {
    LockConfiguration::new(
        name,
        Duration::from_secs(at_most),
        Duration::from_secs(at_least),
    )
    .unwrap()
}

/// Records event kinds and wakes waiters on every event.
#[derive(Clone, Default)]
struct Recorder {
    events: Arc<Mutex<Vec<String>>>,
    changed: Arc<Notify>,
}

impl Recorder {
    fn listener(&self) -> impl Fn(&LockEvent<'_>) + Send + Sync + 'static {
        let (events, changed) = (Arc::clone(&self.events), Arc::clone(&self.changed));
        move |event: &LockEvent<'_>| {
            let kind = match event {
                // Every acquisition has one; `attempts_precede_outcomes` checks them.
                LockEvent::Attempt { .. } => return,
                LockEvent::Acquired(lease) => format!("acquired {}", lease.name()),
                LockEvent::Skipped { lock_name } => format!("skipped {lock_name}"),
                LockEvent::Released(lease) => format!("released {}", lease.name()),
                LockEvent::Extended(lease) => format!("extended {}", lease.name()),
                LockEvent::Lost(lease) => format!("lost {}", lease.name()),
                LockEvent::ExtendFailed { lease, .. } => format!("extend-failed {}", lease.name()),
                LockEvent::ReleaseFailed { lease, .. } => {
                    format!("release-failed {}", lease.name())
                }
                other => format!("{other:?}"),
            };
            events.lock().unwrap().push(kind);
            changed.notify_waiters();
        }
    }

    fn events(&self) -> Vec<String> {
        self.events.lock().unwrap().clone()
    }

    async fn wait_for(&self, wanted: &str) {
        loop {
            let changed = self.changed.notified();
            if self.events().iter().any(|e| e == wanted) {
                return;
            }
            changed.await;
        }
    }
}

fn setup() -> (LockingTaskExecutor, InMemoryLockProvider, Recorder) {
    let store = InMemoryLockProvider::new().with_holder("a");
    let recorder = Recorder::default();
    let executor = LockingTaskExecutor::new(store.clone()).with_listener(recorder.listener());
    (executor, store.with_holder("b"), recorder)
}

#[tokio::test]
async fn executes_then_releases_and_reports_events() {
    let (executor, _, recorder) = setup();
    let c = config("job", 60, 0);
    assert_eq!(
        executor.execute(&c, async { 7 }).await.unwrap(),
        TaskResult::Executed(7)
    );
    assert!(
        executor.try_lock(&c).await.unwrap().is_some(),
        "lock was not released"
    );
    assert_eq!(
        recorder.events()[..3],
        ["acquired job", "released job", "acquired job"]
    );
}

#[tokio::test]
async fn skipped_while_held_elsewhere() {
    let (executor, other, recorder) = setup();
    let c = config("job", 60, 0);
    let held = LockingTaskExecutor::new(other)
        .try_lock(&c)
        .await
        .unwrap()
        .unwrap();
    let ran = executor
        .execute(&c, async { panic!("must not run") })
        .await
        .unwrap();
    assert_eq!(ran, TaskResult::Skipped);
    assert_eq!(recorder.events(), ["skipped job"]);
    held.release().await.unwrap();
}

#[tokio::test]
async fn reentrant_for_same_name_and_nested_for_other_names() {
    let (executor, _, recorder) = setup();
    let (outer, inner) = (config("outer", 60, 0), config("inner", 60, 0));
    let names = executor
        .execute(&outer, async {
            // The lock name a run under `config` sees.
            let run_under = async |config| {
                executor
                    .execute(config, async {
                        LockContext::current().unwrap().name().to_owned()
                    })
                    .await
                    .unwrap()
                    .into_executed()
            };
            let same = run_under(&outer).await.expect("re-entrant run executes");
            let nested = run_under(&inner).await.expect("nested run executes");
            let after = LockContext::current().unwrap().name().to_owned();
            (same, nested, after)
        })
        .await
        .unwrap()
        .into_executed()
        .unwrap();
    assert_eq!(names, ("outer".into(), "inner".into(), "outer".into()));
    assert_eq!(
        recorder.events(),
        [
            "acquired outer",
            "acquired inner",
            "released inner",
            "released outer"
        ],
        "the re-entrant run must not acquire again"
    );
}

#[tokio::test]
async fn releases_after_an_error_value() {
    let (executor, _, _) = setup();
    let c = config("job", 60, 0);
    let out = executor
        .execute(&c, async { Err::<(), _>("boom") })
        .await
        .unwrap();
    assert_eq!(out, TaskResult::Executed(Err("boom")));
    assert!(executor.try_lock(&c).await.unwrap().is_some());
}

#[tokio::test]
async fn releases_after_a_panic_and_resumes_it() {
    let (executor, _, recorder) = setup();
    let c = config("job", 60, 0);
    let (e2, c2) = (executor.clone(), c.clone());
    let joined =
        tokio::spawn(async move { e2.execute(&c2, async { panic!("job exploded") }).await }).await;
    let panic = joined.expect_err("the panic resumes").into_panic();
    assert_eq!(panic.downcast_ref::<&str>(), Some(&"job exploded"));
    assert!(recorder.events().contains(&"released job".to_owned()));
    assert!(executor.try_lock(&c).await.unwrap().is_some());
}

#[tokio::test]
async fn releases_when_the_future_is_dropped() {
    let (executor, _, recorder) = setup();
    let c = config("job", 60, 0);
    let started = Arc::new(Notify::new());
    let (e2, c2, s2) = (executor.clone(), c.clone(), Arc::clone(&started));
    let task = tokio::spawn(async move {
        e2.execute(&c2, async {
            s2.notify_one();
            std::future::pending::<()>().await
        })
        .await
    });
    started.notified().await;
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    recorder.wait_for("released job").await;
    assert!(
        executor.try_lock(&c).await.unwrap().is_some(),
        "dropped task kept the lock"
    );
}

#[tokio::test]
async fn lock_at_least_for_is_honoured_at_release() {
    let clock = Arc::new(ManualClock::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
    ));
    let store = InMemoryLockProvider::new().with_clock(clock.clone());
    let (a, b) = (
        LockingTaskExecutor::new(store.with_holder("a")),
        LockingTaskExecutor::new(store.with_holder("b")),
    );
    let c = config("fast", 60, 10);
    assert!(a.execute(&c, async {}).await.unwrap().was_executed());
    assert_eq!(b.execute(&c, async {}).await.unwrap(), TaskResult::Skipped);
    clock.advance(Duration::from_secs(9));
    assert_eq!(b.execute(&c, async {}).await.unwrap(), TaskResult::Skipped);
    clock.advance(Duration::from_secs(1));
    assert!(b.execute(&c, async {}).await.unwrap().was_executed());
}

#[tokio::test]
async fn context_outside_a_lock_is_a_clear_error() {
    assert!(matches!(LockContext::current(), Err(Error::NoActiveLock)));
    assert!(matches!(
        LockContext::assert_locked(),
        Err(Error::NoActiveLock)
    ));
    let message = Error::NoActiveLock.to_string();
    assert!(message.contains("no lock is held"), "{message}");
}

#[tokio::test]
async fn context_reads_token_and_extends_the_innermost_lock() {
    let clock = Arc::new(ManualClock::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
    ));
    let store = InMemoryLockProvider::new().with_clock(clock.clone());
    let executor = LockingTaskExecutor::new(store.with_holder("a"));
    let c = config("job", 10, 0);
    let (token, before, after) = executor
        .execute(&c, async {
            LockContext::assert_locked().unwrap();
            let ctx = LockContext::current().unwrap();
            let before = ctx.lock_until();
            clock.advance(Duration::from_secs(5));
            ctx.extend(Duration::from_secs(30), Duration::ZERO)
                .await
                .unwrap();
            (ctx.fencing_token(), before, ctx.lock_until())
        })
        .await
        .unwrap()
        .into_executed()
        .unwrap();
    assert_eq!(token, 1);
    assert_eq!(
        after.duration_since(before).unwrap(),
        Duration::from_secs(25)
    );
}

#[tokio::test]
async fn refused_extension_fires_the_lost_signal() {
    let clock = Arc::new(ManualClock::new(
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000),
    ));
    let store = InMemoryLockProvider::new().with_clock(clock.clone());
    let recorder = Recorder::default();
    let a = LockingTaskExecutor::new(store.with_holder("a")).with_listener(recorder.listener());
    let b = LockingTaskExecutor::new(store.with_holder("b"));
    let c = config("job", 10, 0);
    let outcome = a
        .execute(&c, async {
            let ctx = LockContext::current().unwrap();
            clock.advance(Duration::from_secs(11));
            let thief = b
                .try_lock(&c)
                .await
                .unwrap()
                .expect("expired lease is taken over");
            let refused = ctx.extend(Duration::from_secs(10), Duration::ZERO).await;
            ctx.cancelled().await;
            (
                matches!(refused, Err(Error::LockLost { .. })),
                ctx.is_lost(),
                thief.fencing_token(),
            )
        })
        .await
        .unwrap()
        .into_executed()
        .unwrap();
    assert_eq!(outcome, (true, true, 2));
    assert!(recorder.events().contains(&"lost job".to_owned()));
    assert!(
        recorder.events().contains(&"release-failed job".to_owned()),
        "stale release refused"
    );
}

#[tokio::test(start_paused = true)]
async fn lost_signal_fires_at_the_local_deadline_without_keep_alive() {
    let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    let c = config("job", 5, 0);
    let started = tokio::time::Instant::now();
    let waited = executor
        .execute(&c, async {
            LockContext::current().unwrap().cancelled().await;
            assert!(LockContext::current().unwrap().is_lost());
            assert!(matches!(
                LockContext::assert_locked(),
                Err(Error::LockLost { .. })
            ));
            started.elapsed()
        })
        .await
        .unwrap()
        .into_executed()
        .unwrap();
    // Five seconds less the clock allowance (1% + 2 ms).
    assert_eq!(waited, Duration::from_millis(4_948));
}

#[tokio::test]
async fn a_dropped_lock_handle_is_released_in_the_background() {
    let (executor, _, recorder) = setup();
    let c = config("job", 60, 0);
    drop(executor.try_lock(&c).await.unwrap().unwrap());
    recorder.wait_for("released job").await;
    assert!(executor.try_lock(&c).await.unwrap().is_some());
}

#[tokio::test]
async fn extended_handle_replaces_the_old_one() {
    let (executor, other, _) = setup();
    let c = config("job", 60, 0);
    let lock = executor.try_lock(&c).await.unwrap().unwrap();
    let token = lock.fencing_token();
    let lock = lock
        .extend(Duration::from_secs(120), Duration::ZERO)
        .await
        .unwrap()
        .expect("live");
    assert_eq!(lock.fencing_token(), token);
    assert!(
        LockingTaskExecutor::new(other.clone())
            .try_lock(&c)
            .await
            .unwrap()
            .is_none()
    );
    lock.release().await.unwrap();
    assert!(
        LockingTaskExecutor::new(other)
            .try_lock(&c)
            .await
            .unwrap()
            .is_some()
    );
}

/// Every acquisition is announced before the store is asked, and answered by exactly one
/// outcome: what a listener counting attempts (metrics, the fault harness) relies on.
#[tokio::test]
async fn attempts_precede_outcomes() {
    let events = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = Arc::clone(&events);
    let store = InMemoryLockProvider::new();
    let executor = LockingTaskExecutor::new(store.with_holder("a")).with_listener(
        move |event: &LockEvent<'_>| {
            let kind = match event {
                LockEvent::Attempt { .. } => "attempt",
                LockEvent::Acquired(_) => "acquired",
                LockEvent::Skipped { .. } => "skipped",
                LockEvent::AcquireFailed { .. } => "failed",
                _ => return,
            };
            seen.lock().unwrap().push(kind.to_owned());
        },
    );
    let config =
        LockConfiguration::new("attempts", Duration::from_secs(60), Duration::ZERO).unwrap();
    let held = LockingTaskExecutor::new(store.with_holder("b"))
        .try_lock(&config)
        .await
        .unwrap()
        .unwrap();
    let _ = executor.execute(&config, async {}).await.unwrap();
    held.release().await.unwrap();
    let _ = executor.execute(&config, async {}).await.unwrap();
    assert_eq!(
        *events.lock().unwrap(),
        ["attempt", "skipped", "attempt", "acquired"]
    );
}
