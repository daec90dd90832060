//! A run's record is written with the lease the run holds, through the store that granted it:
//! not with whichever lock the task happens to hold innermost.

use std::time::Duration;

use shedlock_core::{InMemoryLockProvider, LockConfiguration, LockProvider, RunQuery};
use shedlock_runtime::{Job, JobLock, LockingTaskExecutor, Schedule, SchedulerConfig, TaskResult};

fn lock(name: &str) -> LockConfiguration {
    LockConfiguration::new(name, Duration::from_secs(60), Duration::ZERO).unwrap()
}

#[tokio::test]
async fn a_re_entrant_run_is_recorded_under_its_own_lock() {
    let store = InMemoryLockProvider::new();
    let executor = LockingTaskExecutor::new(store.clone());
    let job: Job<()> = Job::new(
        "report",
        Schedule::fixed_rate(Duration::from_secs(60)).unwrap(),
        |()| async {},
    )
    .with_lock(JobLock::new("report").unwrap());
    let config = SchedulerConfig::default();
    let (report, other) = (lock("report"), lock("other"));

    // `report` held, then `other` inside it, then the job on `report` inside both: re-entrant
    // on the held `report` lease, while `other` is the innermost lock. (Boxed: three nested
    // executions overflow a debug build's test-thread stack.)
    let outcome = executor
        .execute(&report, async {
            executor
                .execute(&other, Box::pin(job.run_once(&executor, &config, ())))
                .await
        })
        .await
        .unwrap();
    let ran = outcome.into_executed().unwrap().unwrap().into_executed();
    assert_eq!(ran.unwrap().unwrap(), TaskResult::Executed(Ok(())));

    let log = store
        .run_log()
        .expect("the in-memory store keeps run records");
    let held = log.runs(&RunQuery::lock("report")).await.unwrap();
    assert_eq!(held.len(), 1, "{held:#?}");
    assert_eq!((held[0].job.as_str(), held[0].attempt), ("report", 1));
    let innermost = log.runs(&RunQuery::lock("other")).await.unwrap();
    assert!(innermost.is_empty(), "{innermost:#?}");
}
