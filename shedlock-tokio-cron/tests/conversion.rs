//! Which jobs convert, and the errors for those that cannot run as declared. The locked runs
//! themselves are tested against real databases in the facade (`tests/tokio_cron_sql.rs`).

use std::time::Duration;

use shedlock_core::{Error, InMemoryLockProvider, LockConfiguration};
use shedlock_runtime::{Job, JobLock, LockingTaskExecutor, Schedule, SchedulerConfig};
use shedlock_tokio_cron::{IntoTokioCronJob, locked_job};

fn executor() -> LockingTaskExecutor {
    LockingTaskExecutor::new(InMemoryLockProvider::new())
}

fn job(schedule: Schedule) -> Job<()> {
    Job::new("report", schedule, |()| async {})
}

fn lock() -> JobLock {
    JobLock::new("report").unwrap()
}

fn every_minute() -> Schedule {
    Schedule::cron("0 * * * * *").unwrap()
}

/// The field of the `InvalidConfig` error converting `job` gives, with its message.
fn rejected(job: Job<()>, config: &SchedulerConfig) -> (&'static str, String) {
    match job.into_tokio_cron_job(&executor(), config, ()) {
        Err(Error::InvalidConfig { field, message }) => (field, message),
        Err(other) => panic!("expected InvalidConfig, got {other}"),
        Ok(_) => panic!("expected InvalidConfig, got a job"),
    }
}

#[test]
fn locked_cron_jobs_convert_in_any_zone() {
    let config = SchedulerConfig::default();
    for job in [
        job(every_minute()).with_lock(lock()),
        job(every_minute().in_zone("Europe/Berlin").unwrap()).with_lock(lock().keep_alive(true)),
        job(Schedule::cron("0 0 9 * * Mon-Fri 2030").unwrap()).with_lock(lock()),
    ] {
        job.into_tokio_cron_job(&executor(), &config, ()).unwrap();
    }
    let berlin = SchedulerConfig {
        default_zone: "Europe/Berlin".into(),
        ..SchedulerConfig::default()
    };
    job(every_minute())
        .with_lock(lock())
        .into_tokio_cron_job(&executor(), &berlin, ())
        .unwrap();
}

#[test]
fn jobs_that_cannot_run_as_declared_are_rejected_with_the_reason() {
    let config = SchedulerConfig::default();
    let (field, message) = rejected(job(every_minute()), &config);
    assert_eq!(field, "lock");
    assert!(message.contains("job `report` has no lock"), "{message}");

    let leader = job(every_minute())
        .with_lock(lock())
        .leader_only("batch")
        .unwrap();
    let (field, message) = rejected(leader, &config);
    assert_eq!(field, "leader");
    assert!(message.contains("election `batch`"), "{message}");

    let fixed_rate = job(Schedule::fixed_rate(Duration::from_secs(60)).unwrap()).with_lock(lock());
    let (field, message) = rejected(fixed_rate, &config);
    assert_eq!(field, "schedule");
    assert!(message.contains("runs every 1m"), "{message}");

    let delayed = job(every_minute().with_initial_delay(Duration::from_secs(5))).with_lock(lock());
    assert_eq!(rejected(delayed, &config).0, "initial_delay");

    let strict = every_minute()
        .with_misfire_threshold(Duration::from_secs(5))
        .unwrap();
    assert_eq!(
        rejected(job(strict).with_lock(lock()), &config).0,
        "misfire_threshold"
    );
}

#[test]
fn the_configuration_is_checked_with_the_job() {
    let keep_alive_too_slow = SchedulerConfig {
        keep_alive: true,
        keep_alive_interval: Some(Duration::from_secs(60)),
        ..SchedulerConfig::default()
    };
    let short_lease = lock().lock_at_most_for(Duration::from_secs(30)).unwrap();
    let (field, message) = rejected(
        job(every_minute()).with_lock(short_lease),
        &keep_alive_too_slow,
    );
    assert_eq!(field, "keep_alive_interval");
    assert!(message.contains("job `report`"), "{message}");

    let unknown_zone = SchedulerConfig {
        default_zone: "Mars/Olympus_Mons".into(),
        ..SchedulerConfig::default()
    };
    let (field, _) = rejected(job(every_minute()).with_lock(lock()), &unknown_zone);
    assert_eq!(field, "default_zone");
}

#[test]
fn cron_text_is_tokio_cron_schedulers_dialect_with_a_reason_when_rejected() {
    let lock =
        || LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO).unwrap();
    let task = || async {};
    locked_job("*/5 * * * * *", &executor(), lock(), task).unwrap();
    locked_job("0 30 2 * * Sun 2030", &executor(), lock(), task).unwrap();
    for rejected_cron in ["*/5 * * * *", "0 61 * * * *", "every minute"] {
        let Err(err) = locked_job(rejected_cron, &executor(), lock(), task) else {
            panic!("{rejected_cron:?} accepted");
        };
        let message = err.to_string();
        assert!(
            matches!(err, Error::InvalidConfig { field: "cron", .. }),
            "{message}"
        );
        assert!(message.contains(rejected_cron), "{message}");
    }
}
