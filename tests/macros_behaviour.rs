//! What `#[scheduled]` and `#[scheduler_lock]` jobs do at run time, through the facade.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use shedlock::{
    InMemoryLockProvider, JobLock, LockConfiguration, LockContext, LockProvider,
    LockingTaskExecutor, ManualClock, SchedulerConfig, TaskResult, scheduled, scheduler_lock,
};

/// What a job saw while it ran.
#[derive(Debug, Clone, Default)]
struct Seen {
    runs: Arc<Mutex<Vec<Run>>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    lock_name: String,
    fencing_token: u64,
    lease_length: Duration,
}

impl Seen {
    fn runs(&self) -> Vec<Run> {
        self.runs.lock().unwrap().clone()
    }
}

#[scheduled(fixed_rate = "1m")]
#[scheduler_lock(
    name = "behaviour_report",
    lock_at_most_for = "5m",
    lock_at_least_for = "PT30S"
)]
async fn report(state: Seen, lock: LockContext) -> Result<(), String> {
    let lease = lock.lease();
    state.runs.lock().unwrap().push(Run {
        lock_name: lock.name().to_owned(),
        fencing_token: lock.fencing_token(),
        lease_length: lease
            .lock_until()
            .duration_since(lease.locked_at())
            .unwrap(),
    });
    Ok(())
}

/// The other attribute order, the lock context first, and an error to return.
#[scheduler_lock(name = "behaviour_failing", keep_alive = true)]
#[scheduled(cron = "0 0 3 * * *", zone = "Europe/Berlin", initial_delay = "5s")]
async fn failing(_lock: LockContext, reason: &'static str) -> anyhow::Result<u32> {
    anyhow::bail!("gave up: {reason}")
}

/// Crash recovery from the attributes: catch-up, retries, reruns.
#[scheduled(cron = "0 0 2 * * *", zone = "Europe/Berlin", catch_up = "6h")]
#[scheduler_lock(
    name = "behaviour_nightly",
    retries = 3,
    retry_backoff = "PT30S",
    on_interrupted = "rerun"
)]
async fn nightly() {}

/// No lock and no state: runs on every instance, fits a registry of any state type.
#[scheduled(fixed_delay = "500ms")]
async fn heartbeat() {}

/// Callable directly, as a plain async fn.
#[scheduled(fixed_rate = "10s")]
pub async fn add_one(counter: Arc<Mutex<u32>>) {
    *counter.lock().unwrap() += 1;
}

/// This instance's executor on an in-memory store on a manual clock at the epoch, and another
/// instance (`other`) on the same store.
fn at_epoch() -> (Arc<ManualClock>, LockingTaskExecutor, InMemoryLockProvider) {
    let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
    let provider = InMemoryLockProvider::new()
        .with_clock(clock.clone())
        .with_holder("this");
    let other = provider.with_holder("other");
    (clock, LockingTaskExecutor::new(provider), other)
}

/// The lock of `report`, as another instance takes it.
fn report_lock() -> LockConfiguration {
    LockConfiguration::new("behaviour_report", Duration::from_secs(60), Duration::ZERO).unwrap()
}

/// One run of `job` on `executor` with `state` (durations from the default configuration).
async fn run_once<S: Clone + Send + 'static>(
    job: &shedlock::Job<S>,
    executor: &LockingTaskExecutor,
    state: S,
) -> TaskResult<Result<(), String>> {
    job.run_once(executor, &SchedulerConfig::default(), state)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_locked_job_runs_with_its_state_and_lock_context() {
    let (_, executor, _) = at_epoch();
    let seen = Seen::default();

    let outcome = run_once(&shedlock::job!(report), &executor, seen.clone()).await;

    assert_eq!(outcome, TaskResult::Executed(Ok(())));
    let runs = seen.runs();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].lock_name, "behaviour_report");
    assert_eq!(
        runs[0].lease_length,
        Duration::from_secs(300),
        "lock_at_most_for"
    );
}

#[tokio::test]
async fn a_locked_job_is_skipped_while_another_instance_holds_the_lock() {
    let (clock, executor, other) = at_epoch();
    let held = other.acquire(&report_lock()).await.unwrap().expect("free");
    let seen = Seen::default();
    let job = shedlock::job!(report);

    let outcome = run_once(&job, &executor, seen.clone()).await;
    assert_eq!(outcome, TaskResult::Skipped);
    assert!(seen.runs().is_empty());

    clock.advance(Duration::from_secs(60));
    let outcome = run_once(&job, &executor, seen.clone()).await;
    assert!(outcome.was_executed());
    assert!(
        seen.runs()[0].fencing_token > held.fencing_token(),
        "the job gets the fencing token of its own acquisition"
    );
}

#[tokio::test]
async fn lock_at_least_for_from_the_macro_holds_the_lock_after_the_run() {
    let (clock, executor, other) = at_epoch();
    let outcome = run_once(&shedlock::job!(report), &executor, Seen::default()).await;
    assert!(outcome.was_executed());

    let config = report_lock();
    clock.advance(Duration::from_secs(29));
    assert!(other.acquire(&config).await.unwrap().is_none(), "held 30 s");
    clock.advance(Duration::from_secs(1));
    assert!(other.acquire(&config).await.unwrap().is_some());
}

#[tokio::test]
async fn errors_returned_by_the_job_come_back_as_text() {
    let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    let outcome = run_once(&shedlock::job!(failing), &executor, "the disk is full").await;
    assert_eq!(
        outcome,
        TaskResult::Executed(Err("gave up: the disk is full".to_owned()))
    );
}

#[tokio::test]
async fn a_job_without_lock_or_state_fits_any_state() {
    let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    let for_numbers: shedlock::Job<u32> = shedlock::job!(heartbeat);
    let for_text: shedlock::Job<String> = shedlock::job!(heartbeat);
    assert!(for_numbers.lock().is_none());
    assert_eq!(
        run_once(&for_numbers, &executor, 7).await,
        TaskResult::Executed(Ok(()))
    );
    assert_eq!(
        run_once(&for_text, &executor, "x".into()).await,
        TaskResult::Executed(Ok(()))
    );
}

#[tokio::test]
async fn the_function_stays_callable_directly() {
    let counter = Arc::new(Mutex::new(0));
    add_one(counter.clone()).await;
    assert_eq!(*counter.lock().unwrap(), 1);

    let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    let outcome = run_once(&shedlock::job!(add_one), &executor, counter.clone()).await;
    assert_eq!(outcome, TaskResult::Executed(Ok(())));
    assert_eq!(*counter.lock().unwrap(), 2);

    // A locked job's function can be called inside any locked execution.
    let config =
        LockConfiguration::new("by_hand", Duration::from_secs(60), Duration::ZERO).unwrap();
    let seen = Seen::default();
    assert!(
        LockContext::current().is_err(),
        "no lock outside an execution"
    );
    let outcome = executor
        .execute(&config, async {
            report(seen.clone(), LockContext::current().unwrap()).await
        })
        .await
        .unwrap();
    assert_eq!(outcome, TaskResult::Executed(Ok(())));
    assert_eq!(seen.runs()[0].lock_name, "by_hand");
}

#[test]
fn the_job_carries_the_name_schedule_and_lock_from_the_attributes() {
    let job = shedlock::job!(report);
    assert_eq!(job.name(), "report");
    assert_eq!(job.schedule().to_string(), "every 1m");
    let lock = JobLock::new("behaviour_report")
        .unwrap()
        .lock_at_most_for(Duration::from_secs(300))
        .unwrap()
        .lock_at_least_for(Duration::from_secs(30))
        .unwrap();
    assert_eq!(job.lock(), Some(&lock));

    let job = shedlock::job!(failing);
    assert_eq!(job.name(), "failing");
    assert_eq!(
        job.schedule().to_string(),
        "cron \"0 0 3 * * *\" in Europe/Berlin, first after 5s"
    );
    let lock = JobLock::new("behaviour_failing").unwrap().keep_alive(true);
    assert_eq!(job.lock(), Some(&lock));

    let job: shedlock::Job<()> = shedlock::job!(heartbeat);
    assert_eq!(job.schedule().to_string(), "500ms after the previous run");

    let job: shedlock::Job<()> = shedlock::job!(nightly);
    assert_eq!(
        job.schedule().catch_up(),
        Some(Duration::from_secs(6 * 3600))
    );
    let lock = JobLock::new("behaviour_nightly")
        .unwrap()
        .retries(3, Duration::from_secs(30))
        .on_interrupted(shedlock::OnInterrupted::Rerun);
    assert_eq!(job.lock(), Some(&lock));
}
