//! Invalid configuration values through the public API: each is a typed error naming the field
//! (or argument), never a panic. Only the values no other test covers; docs/RELIABILITY.md lists
//! all of them with where each is tested. Macro arguments are compile errors: `shedlock-macros/tests/ui/fail`.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use shedlock::{
    ElectionConfig, Error, InMemoryLockProvider, Job, JobLock, JobRegistry, LeaderElection,
    LockConfiguration, Schedule, Scheduler, SchedulerConfig,
};

/// The field an `InvalidConfig` names; panics (with the input) for anything else.
fn field<T: std::fmt::Debug>(
    input: &str,
    result: std::thread::Result<Result<T, Error>>,
) -> &'static str {
    match result {
        Ok(Err(Error::InvalidConfig { field, .. })) => field,
        Ok(other) => panic!("{input}: expected InvalidConfig, got {other:?}"),
        Err(_) => panic!("{input}: panicked"),
    }
}

/// What a validation did: returned (a result) or panicked.
type Outcome = std::thread::Result<Result<(), Error>>;

fn catch<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    std::panic::catch_unwind(AssertUnwindSafe(f))
}

const S: fn(u64) -> Duration = Duration::from_secs;

/// Starts a scheduler with `config` and one job under `lock` (its fire-every-second schedule is
/// valid), on a task of its own: what the start returned, or that it panicked.
async fn start(config: SchedulerConfig, lock: JobLock) -> Outcome {
    let job = Job::new("j", Schedule::fixed_rate(S(1)).unwrap(), |()| async {}).with_lock(lock);
    tokio::spawn(async move {
        Scheduler::builder()
            .provider(InMemoryLockProvider::new())
            .config(config)
            .registry(JobRegistry::new(()).add(job))
            .start()
            .await
            .map(drop)
    })
    .await
    .map_err(|e| Box::new(e.to_string()) as Box<dyn std::any::Any + Send>)
}

#[test]
fn invalid_values_name_their_field() {
    let scheduler_config = |config: SchedulerConfig| catch(move || config.validate());
    let job_lock = |name: String| catch(move || JobLock::new(name).map(drop));
    let cron = |expression: &'static str| catch(move || Schedule::cron(expression).map(drop));
    let base = SchedulerConfig::default;
    let cases: Vec<(&str, &str, Outcome)> = vec![
        (
            "holder of 256 bytes",
            "holder",
            scheduler_config(SchedulerConfig {
                holder: Some("h".repeat(256)),
                ..base()
            }),
        ),
        (
            "holder with a newline",
            "holder",
            scheduler_config(SchedulerConfig {
                holder: Some("a\nb".into()),
                ..base()
            }),
        ),
        (
            "keep_alive_interval equal to default_lock_at_most_for",
            "keep_alive_interval",
            scheduler_config(SchedulerConfig {
                keep_alive_interval: Some(S(600)),
                ..base()
            }),
        ),
        (
            "leader_election with renew_deadline ≥ lease_duration",
            "lease_duration",
            scheduler_config(SchedulerConfig {
                leader_election: ElectionConfig {
                    renew_deadline: S(15),
                    ..ElectionConfig::default()
                },
                ..base()
            }),
        ),
        (
            "lock_at_most_for over 100 years",
            "lock_at_most_for",
            catch(|| {
                LockConfiguration::new("x", S(101 * 366 * 24 * 3600), Duration::ZERO).map(drop)
            }),
        ),
        ("JobLock name of 65 bytes", "name", job_lock("j".repeat(65))),
        ("JobLock name with a tab", "name", job_lock("a\tb".into())),
        (
            "JobLock lock_at_least_for > lock_at_most_for",
            "lock_at_least_for",
            catch(|| {
                JobLock::new("j")
                    .and_then(|l| l.lock_at_most_for(S(1)))
                    .and_then(|l| l.lock_at_least_for(S(2)))
                    .map(drop)
            }),
        ),
        ("cron with 5 fields", "cron", cron("*/5 * * * *")),
        ("cron day 32", "cron", cron("0 0 0 32 * *")),
        ("cron of SQL", "cron", cron("'; DROP TABLE shedlock; --")),
        (
            "unknown zone",
            "zone",
            catch(|| {
                Schedule::cron("0 0 3 * * *")
                    .and_then(|s| s.in_zone("Mars/Olympus"))
                    .map(drop)
            }),
        ),
        (
            "zone on a fixed rate",
            "zone",
            catch(|| {
                Schedule::fixed_rate(S(1))
                    .and_then(|s| s.in_zone("UTC"))
                    .map(drop)
            }),
        ),
        (
            "fixed_delay of zero",
            "fixed_delay",
            catch(|| Schedule::fixed_delay(Duration::ZERO).map(drop)),
        ),
        (
            "empty election name for a job",
            "leader",
            catch(|| {
                Job::<()>::new("j", Schedule::fixed_rate(S(1)).unwrap(), |()| async {})
                    .leader_only("")
                    .map(drop)
            }),
        ),
    ];
    for (input, expected, result) in cases {
        assert_eq!(field(input, result), expected, "{input}");
    }
}

#[test]
fn toml_values_of_the_wrong_kind_name_their_field() {
    for (toml, key) in [
        (
            r#"default_lock_at_most_for = "-5s""#,
            "default_lock_at_most_for",
        ),
        (
            r#"default_lock_at_most_for = 600"#,
            "default_lock_at_most_for",
        ),
        (r#"default_zone = 5"#, "default_zone"),
        (r#"keep_alive = "yes""#, "keep_alive"),
        (
            "[leader_election]\nretry_period = \"2 fortnights\"",
            "retry_period",
        ),
        ("[leader_election]\nlease = \"15s\"", "lease"),
    ] {
        let error = toml::from_str::<SchedulerConfig>(toml)
            .unwrap_err()
            .to_string();
        assert!(error.contains(key), "{toml}: {error}");
    }
}

#[tokio::test]
async fn invalid_values_found_at_start_name_their_field() {
    // A job's own keep-alive interval must be shorter than its lease.
    let config = SchedulerConfig {
        keep_alive: true,
        keep_alive_interval: Some(S(5)),
        ..SchedulerConfig::default()
    };
    let lock = JobLock::new("j").unwrap().lock_at_most_for(S(5)).unwrap();
    assert_eq!(
        field("per-job keep_alive_interval", start(config, lock).await),
        "keep_alive_interval"
    );

    let election = catch(|| {
        LeaderElection::builder("", InMemoryLockProvider::new())
            .start()
            .map(drop)
    });
    assert_eq!(field("empty election name", election), "name");
}

/// Durations far beyond any sensible value are errors, not panics. These panicked until
/// 776622a (`ElectionConfig::validate` multiplied `retry_period` by 1.2 with
/// `Duration::mul_f64`; a huge `fixed_delay` overflowed the runner's clock arithmetic after the
/// first run).
#[tokio::test]
async fn huge_durations_are_errors_not_panics() {
    let huge = ElectionConfig {
        lease_duration: Duration::MAX,
        renew_deadline: Duration::MAX,
        retry_period: Duration::MAX,
    };
    assert_eq!(
        field(
            "election timing of Duration::MAX",
            catch(|| huge.validate())
        ),
        "lease_duration"
    );
    let config = SchedulerConfig {
        leader_election: huge,
        ..SchedulerConfig::default()
    };
    assert_eq!(
        field("scheduler with that election", catch(|| config.validate())),
        "lease_duration"
    );
    assert_eq!(
        field(
            "fixed_delay(MAX)",
            catch(|| Schedule::fixed_delay(Duration::MAX).map(drop))
        ),
        "fixed_delay"
    );
    assert_eq!(
        field(
            "fixed_rate(MAX)",
            catch(|| Schedule::fixed_rate(Duration::MAX).map(drop))
        ),
        "fixed_rate"
    );

    // A default lease over 100 years passes `validate` and is refused at start, naming the
    // lease it produced for the job.
    let config = SchedulerConfig {
        default_lock_at_most_for: Duration::MAX,
        ..SchedulerConfig::default()
    };
    let started = start(config, JobLock::new("j").unwrap()).await;
    let named = field("default_lock_at_most_for of Duration::MAX", started);
    assert!(
        ["default_lock_at_most_for", "lock_at_most_for"].contains(&named),
        "{named}"
    );
}
