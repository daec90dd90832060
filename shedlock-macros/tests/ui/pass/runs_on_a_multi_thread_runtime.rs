#![deny(warnings)]
// A job built by the macro runs on a spawning runtime, state cloned per run.
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use shedlock::{
    InMemoryLockProvider, LockContext, LockingTaskExecutor, SchedulerConfig, TaskResult, scheduled,
    scheduler_lock,
};

#[derive(Clone, Default)]
struct AppState {
    last_token: Arc<AtomicU64>,
}

#[scheduled(fixed_rate = "1s")]
#[scheduler_lock(name = "spawned")]
async fn spawned(state: AppState, lock: LockContext) -> Result<(), std::io::Error> {
    tokio::task::yield_now().await;
    state
        .last_token
        .store(lock.fencing_token(), Ordering::SeqCst);
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    let state = AppState::default();
    let job = shedlock::job!(spawned);
    let handle = tokio::spawn({
        let state = state.clone();
        async move {
            job.run_once(&executor, &SchedulerConfig::default(), state)
                .await
                .unwrap()
        }
    });
    assert_eq!(handle.await.unwrap(), TaskResult::Executed(Ok(())));
    assert!(state.last_token.load(Ordering::SeqCst) > 0);
}
