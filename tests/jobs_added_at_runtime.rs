//! `#[scheduled]` jobs added, replaced and removed on a running scheduler, through the facade.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, UNIX_EPOCH};

use shedlock::{
    InMemoryLockProvider, JobRegistry, LockContext, RemoveMode, Schedule, Scheduler, TokioClock,
    scheduled, scheduler_lock,
};

#[derive(Clone, Default)]
struct Tenants {
    reports: Arc<AtomicUsize>,
}

#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(name = "runtime_report", lock_at_most_for = "1m")]
async fn report(state: Tenants, lock: LockContext) {
    assert!(lock.fencing_token() > 0);
    state.reports.fetch_add(1, Ordering::SeqCst);
}

#[tokio::test(start_paused = true)]
async fn a_scheduled_job_is_added_replaced_and_removed_at_runtime() {
    // Half a second before a whole second: the per-second cron fires at 0.5 s, 1.5 s, …
    let clock = Arc::new(TokioClock::starting_at(
        UNIX_EPOCH + Duration::from_millis(1_700_000_039_500),
    ));
    let tenants = Tenants::default();
    let scheduler = Scheduler::builder()
        .provider(InMemoryLockProvider::new().with_clock(clock.clone()))
        .clock(clock)
        .registry(JobRegistry::new(tenants.clone()))
        .start()
        .await
        .unwrap();
    let jobs = scheduler.job_control::<Tenants>().unwrap();

    jobs.add(shedlock::job!(report)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(3_250)).await; // seconds 0, 1, 2
    assert_eq!(tenants.reports.load(Ordering::SeqCst), 3);

    // The same function on another schedule: every other second (4 and 6 by 7.25 s).
    let every_other = Schedule::cron("*/2 * * * * *").unwrap();
    let moved = shedlock::job!(report).with_schedule(every_other);
    jobs.replace(moved).await.unwrap();
    assert_eq!(scheduler.status()[0].schedule, "cron \"*/2 * * * * *\"");
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(tenants.reports.load(Ordering::SeqCst), 5);

    let last = jobs.remove("report", RemoveMode::Finish).await.unwrap();
    assert_eq!((last.name.as_str(), last.executions), ("report", 5));
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(tenants.reports.load(Ordering::SeqCst), 5);
    assert!(scheduler.status().is_empty());
    scheduler.shutdown().await;
}
