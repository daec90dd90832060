//! A tick whose lock is granted after the job's next fire time (its claim waited out a silent
//! network partition in its socket) is given back unused, so the next tick claims on time.
//! Paused clock, an in-memory store whose first answers come late.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::tokio_store;
use shedlock_core::{
    Error, InMemoryLockProvider, LockConfiguration, LockLease, LockProvider, async_trait,
};
use shedlock_runtime::{
    Job, JobLock, JobOutcome, JobRegistry, LockEvent, Schedule, Scheduler, SchedulerConfig,
};
use tokio::time::Instant;

/// A store whose first `late` acquisitions are granted, and answered, `delay` after they were
/// asked: as a claim held up in a partition that drops packets, then forwarded when it heals.
#[derive(Debug, Clone)]
struct LateAnswers {
    inner: InMemoryLockProvider,
    delay: Duration,
    late: usize,
    asked: Arc<AtomicUsize>,
}

#[async_trait]
impl LockProvider for LateAnswers {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        if self.asked.fetch_add(1, Ordering::SeqCst) < self.late {
            tokio::time::sleep(self.delay).await;
        }
        self.inner.acquire(config).await
    }
    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        self.inner.release(lease).await
    }
    async fn extend(
        &self,
        lease: &LockLease,
        at_most: Duration,
        at_least: Duration,
    ) -> Result<Option<LockLease>, Error> {
        self.inner.extend(lease, at_most, at_least).await
    }
    fn holder(&self) -> &str {
        self.inner.holder()
    }
}

/// A per-second fixed-rate job on lock `name` with a minute's lease, writing down when each
/// run starts (milliseconds after `origin`).
fn every_second(name: &str, origin: Instant, starts: &Arc<Mutex<Vec<u128>>>) -> Job<()> {
    let starts = Arc::clone(starts);
    Job::new(
        name.to_owned(),
        Schedule::fixed_rate(Duration::from_secs(1)).unwrap(),
        move |()| {
            starts.lock().unwrap().push(origin.elapsed().as_millis());
            async {}
        },
    )
    .with_lock(
        JobLock::new(name.to_owned())
            .unwrap()
            .lock_at_most_for(Duration::from_secs(60))
            .unwrap(),
    )
}

/// Starts `jobs` (all per second, from now) on a store whose first `jobs.len()` answers come
/// 2.5 s late; after 5.2 s, the run starts of each job, the scheduler's status and the
/// fencing tokens released.
async fn run_with_a_late_first_answer(names: &[&str]) -> (Vec<Vec<u128>>, Scheduler, Vec<u64>) {
    let store = LateAnswers {
        inner: tokio_store().with_holder("a"),
        delay: Duration::from_millis(2_500),
        late: names.len(),
        asked: Arc::default(),
    };
    let released: Arc<Mutex<Vec<u64>>> = Arc::default();
    let seen = Arc::clone(&released);
    let origin = Instant::now();
    let starts: Vec<_> = names.iter().map(|_| Arc::default()).collect();
    let mut registry = JobRegistry::new(());
    for (name, starts) in names.iter().zip(&starts) {
        registry = registry.add(every_second(name, origin, starts));
    }
    let scheduler = Scheduler::builder()
        .provider(store)
        // No heartbeat lease: the lease is the whole minute.
        .config(SchedulerConfig {
            run_lease: Duration::ZERO,
            ..SchedulerConfig::default()
        })
        .listener(move |event: &LockEvent<'_>| {
            if let LockEvent::Released(lease) = event {
                seen.lock().unwrap().push(lease.fencing_token());
            }
        })
        .registry(registry)
        .start()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5_200)).await;
    let starts = starts.iter().map(|s| s.lock().unwrap().clone()).collect();
    let released = released.lock().unwrap().clone();
    (starts, scheduler, released)
}

fn assert_stale_tick_given_back(starts: &[u128], status: &shedlock_runtime::JobStatus) {
    // The tick due at 0 was granted at 2.5 s, after the tick due at 1 s: not run. The ticks due
    // at 1 s and 2 s passed while it waited; the next one, at 3 s, ran on time, and so on.
    assert_eq!(starts, [3_000, 4_000, 5_000], "{status:?}");
    assert_eq!(status.missed_ticks, 1, "{status:?}");
    assert_eq!(status.executions, 3, "{status:?}");
}

#[tokio::test(start_paused = true)]
async fn a_claim_granted_after_the_next_fire_time_is_given_back_and_the_next_tick_runs() {
    let (starts, scheduler, released) = run_with_a_late_first_answer(&["report"]).await;
    let status = &scheduler.status()[0];
    assert_stale_tick_given_back(&starts[0], status);
    // The stale grant was released (token 1), then every run's lock.
    assert_eq!(released, [1, 2, 3, 4], "{status:?}");
    scheduler.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn stale_claims_of_a_batch_are_given_back_too() {
    let (starts, scheduler, released) = run_with_a_late_first_answer(&["report", "export"]).await;
    for (starts, status) in starts.iter().zip(scheduler.status()) {
        assert_stale_tick_given_back(starts, &status);
        assert!(
            !matches!(status.last_outcome, Some(JobOutcome::Missed { .. })),
            "{status:?}"
        );
    }
    assert_eq!(
        released.len(),
        8,
        "two stale grants and six runs: {released:?}"
    );
    scheduler.shutdown().await;
}

/// The stale grant given back does not count against the next tick: a cron tick refuses its
/// lock if anyone took it within 250 ms before it was due (an instance whose clock runs ahead),
/// and the grant given back 0.1 s before the next fire time was this instance's own.
#[tokio::test(start_paused = true)]
async fn a_grant_given_back_just_before_a_tick_does_not_hold_the_tick_up() {
    use shedlock_core::TokioClock;
    use std::time::{SystemTime, UNIX_EPOCH};
    // Cron second s fires s and a half seconds into the test.
    let minute = UNIX_EPOCH + Duration::from_secs(1_700_000_040);
    let clock = Arc::new(TokioClock::starting_at(minute - Duration::from_millis(500)));
    let store = LateAnswers {
        inner: InMemoryLockProvider::new()
            .with_clock(clock.clone())
            .with_holder("a"),
        // The tick of second 0 (at 0.5 s) is answered at 3.4 s: stale, given back 0.1 s before
        // the tick of second 3.
        delay: Duration::from_millis(2_900),
        late: 1,
        asked: Arc::default(),
    };
    let seconds: Arc<Mutex<Vec<u64>>> = Arc::default();
    let seen = Arc::clone(&seconds);
    let job = Job::new(
        "report",
        Schedule::cron("* * * * * *").unwrap(),
        move |()| {
            let tick = shedlock_runtime::RunContext::current().and_then(|run| run.tick());
            let second = tick.map(|tick: SystemTime| {
                tick.duration_since(minute)
                    .map_or(0, |since| since.as_secs())
            });
            seen.lock().unwrap().extend(second);
            async {}
        },
    )
    .with_lock(
        JobLock::new("report")
            .unwrap()
            .lock_at_most_for(Duration::from_secs(60))
            .unwrap(),
    );
    let scheduler = Scheduler::builder()
        .provider(store)
        .clock(clock)
        .registry(JobRegistry::new(()).add(job))
        .start()
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(5_200)).await;
    let status = scheduler.status().remove(0);
    scheduler.shutdown().await;
    assert_eq!(*seconds.lock().unwrap(), [3, 4], "{status:?}");
}
