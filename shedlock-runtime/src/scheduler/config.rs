//! The scheduler's configuration: defaults for every job, loadable from a file.

use std::time::Duration;

use chrono_tz::Tz;
use serde::Deserialize;

use crate::Error;
use crate::scheduler::schedule::{check_period, parse_zone};
use shedlock_core::__private as lock_config;

/// [`SchedulerConfig::run_lease`] unless set.
const DEFAULT_RUN_LEASE: Duration = Duration::from_secs(30);

/// Scheduler-wide settings and the defaults every job falls back to.
///
/// Implements `serde::Deserialize` and `Default`. Durations are written as in the attributes,
/// in humantime (`"10m"`, `"1h 30m"`, `"500ms"`) or ISO-8601 (`"PT10M"`, `"P1DT2H"`,
/// `"PT0.5S"`), the grammar of [`parse_duration`](shedlock_rules::parse_duration). Unknown keys are
/// rejected so a typo does not silently fall back to a default; a wrong value is reported with
/// its key.
///
/// ```
/// use std::time::Duration;
/// use shedlock_runtime::SchedulerConfig;
///
/// let config: SchedulerConfig = toml::from_str(r#"
///     default_lock_at_most_for = "10m"
///     default_lock_at_least_for = "5s"
///     misfire_threshold = "PT2M"
///     default_zone = "Europe/Berlin"
/// "#).unwrap();
/// config.validate()?;
/// assert_eq!(config.default_lock_at_most_for, Duration::from_secs(600));
/// assert_eq!(config.misfire_threshold, Duration::from_secs(120));
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerConfig {
    /// Lease of a job whose lock sets no `lock_at_most_for`. Default: 10 minutes.
    #[serde(with = "shedlock_rules::serde_duration")]
    pub default_lock_at_most_for: Duration,
    /// Minimum hold of a job whose lock sets no `lock_at_least_for`. Default: zero.
    #[serde(with = "shedlock_rules::serde_duration")]
    pub default_lock_at_least_for: Duration,
    /// Holder identity written to the lock store. Default: `host:pid:random`
    /// ([`default_holder`](shedlock_core::default_holder)).
    pub holder: Option<String>,
    /// IANA time zone for cron jobs that name none. Default: `UTC`.
    pub default_zone: String,
    /// How long shutdown waits for running jobs before asking them to stop. Default: 30 s.
    #[serde(with = "shedlock_rules::serde_duration")]
    pub shutdown_grace_period: Duration,
    /// How long shutdown waits after asking jobs to stop before aborting them. Default: 5 s.
    #[serde(with = "shedlock_rules::serde_duration")]
    pub shutdown_cancel_period: Duration,
    /// Whether locked jobs extend their lease while they run, unless a job says otherwise.
    /// Default: false.
    pub keep_alive: bool,
    /// How often keep-alive extends the lease; `None`: a third of `lock_at_most_for`. At most
    /// half of `default_lock_at_most_for`, and of the `lock_at_most_for` of every job that
    /// keeps its lease alive.
    #[serde(with = "shedlock_rules::serde_duration::option")]
    pub keep_alive_interval: Option<Duration>,
    /// A tick that would start later than this after its fire time (on this instance's
    /// monotonic clock: a process pause, a stopped container, an overloaded host) is not run
    /// but counted as missed, unless the job sets its own. Default: 60 s.
    #[serde(with = "shedlock_rules::serde_duration")]
    pub misfire_threshold: Duration,
    /// Heartbeat lease of a running locked job: the lock is taken for this long (at least the
    /// job's `lock_at_least_for`) and renewed every third of it while the job runs, up to the
    /// job's `lock_at_most_for`, so the lock of an instance that dies mid-run frees within
    /// about this long instead of `lock_at_most_for`. Zero turns heartbeats off (the lease is
    /// `lock_at_most_for`, ShedLock's behaviour). Jobs with `keep_alive` keep their own
    /// renewal. Default: 30 s.
    #[serde(with = "shedlock_rules::serde_duration")]
    pub run_lease: Duration,
    /// Timing of the elections leader-only jobs follow.
    pub leader_election: crate::ElectionConfig,
    /// Whether jobs run at all on this instance (e.g. off in a one-off maintenance process).
    /// Default: true.
    pub enabled: bool,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            default_lock_at_most_for: Duration::from_secs(600),
            default_lock_at_least_for: Duration::ZERO,
            holder: None,
            default_zone: "UTC".to_owned(),
            shutdown_grace_period: Duration::from_secs(30),
            shutdown_cancel_period: Duration::from_secs(5),
            keep_alive: false,
            keep_alive_interval: None,
            misfire_threshold: Duration::from_secs(60),
            run_lease: DEFAULT_RUN_LEASE,
            leader_election: crate::ElectionConfig::default(),
            enabled: true,
        }
    }
}

impl SchedulerConfig {
    /// Checks every field.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the first invalid field.
    pub fn validate(&self) -> Result<(), Error> {
        check_period("default_lock_at_most_for", self.default_lock_at_most_for)?;
        shedlock_rules::check_at_least(
            self.default_lock_at_least_for,
            self.default_lock_at_most_for,
            "default_lock_at_most_for",
        )
        .map_err(|error| Error::invalid_config("default_lock_at_least_for", error.to_string()))?;
        if let Some(holder) = &self.holder {
            crate::validate_holder(holder)?;
        }
        self.zone()?;
        check_period("misfire_threshold", self.misfire_threshold)?;
        shedlock_rules::check_duration(self.run_lease)
            .map_err(|error| Error::invalid_config("run_lease", error.to_string()))?;
        self.leader_election.validate()?;
        if let Some(interval) = self.keep_alive_interval {
            lock_config::validate_keep_alive_interval(
                interval,
                self.default_lock_at_most_for,
                "default_lock_at_most_for",
            )?;
        }
        Ok(())
    }

    /// The holder identity to build providers with: `holder` if set, else
    /// [`default_holder`](shedlock_core::default_holder), e.g. `PgLockProvider::builder(pool).holder(config.holder_or_default())`.
    pub fn holder_or_default(&self) -> &str {
        match &self.holder {
            Some(holder) => holder,
            None => crate::default_holder(),
        }
    }

    /// The default zone, parsed.
    pub(crate) fn zone(&self) -> Result<Tz, Error> {
        parse_zone("default_zone", &self.default_zone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(config: SchedulerConfig) -> &'static str {
        match config.validate() {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    #[test]
    fn default_is_valid() {
        SchedulerConfig::default().validate().unwrap();
    }

    #[test]
    fn invalid_values_name_their_field() {
        let base = SchedulerConfig::default;
        assert_eq!(
            field(SchedulerConfig {
                default_lock_at_most_for: Duration::ZERO,
                ..base()
            }),
            "default_lock_at_most_for"
        );
        assert_eq!(
            field(SchedulerConfig {
                default_lock_at_least_for: Duration::from_secs(3600),
                ..base()
            }),
            "default_lock_at_least_for"
        );
        assert_eq!(
            field(SchedulerConfig {
                default_zone: "Mars/Base".into(),
                ..base()
            }),
            "default_zone"
        );
        assert_eq!(
            field(SchedulerConfig {
                holder: Some(String::new()),
                ..base()
            }),
            "holder"
        );
        assert_eq!(
            field(SchedulerConfig {
                misfire_threshold: Duration::ZERO,
                ..base()
            }),
            "misfire_threshold"
        );
        assert_eq!(
            field(SchedulerConfig {
                keep_alive_interval: Some(Duration::ZERO),
                ..base()
            }),
            "keep_alive_interval"
        );
    }

    #[test]
    fn durations_are_read_with_the_attributes_grammar() {
        let config: SchedulerConfig = toml::from_str(
            r#"
            default_lock_at_most_for = "PT5M"
            keep_alive_interval = "P0DT1M30S"
            misfire_threshold = "pt0,5s"
            shutdown_grace_period = "1h 30m"
            leader_election = { lease_duration = "PT15S", renew_deadline = "10s", retry_period = "PT2S" }
            "#,
        )
        .unwrap();
        config.validate().unwrap();
        assert_eq!(config.default_lock_at_most_for, Duration::from_secs(300));
        assert_eq!(config.keep_alive_interval, Some(Duration::from_secs(90)));
        assert_eq!(config.misfire_threshold, Duration::from_millis(500));
        assert_eq!(config.shutdown_grace_period, Duration::from_secs(5400));
        assert_eq!(
            config.leader_election.lease_duration,
            Duration::from_secs(15)
        );
        for (toml, field, message) in [
            (
                r#"misfire_threshold = "P1M""#,
                "misfire_threshold",
                "\"P1M\": ISO-8601 months",
            ),
            (
                r#"shutdown_grace_period = "100y 1s""#,
                "shutdown_grace_period",
                "must be at most 100 years",
            ),
            (
                r#"keep_alive_interval = "PT1M1H""#,
                "keep_alive_interval",
                "in that order",
            ),
            (
                r#"leader_election = { retry_period = "2" }"#,
                "retry_period",
                "time unit needed",
            ),
        ] {
            let err = toml::from_str::<SchedulerConfig>(toml)
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(field) && err.contains(message),
                "{toml}: {err}"
            );
        }
    }

    #[test]
    fn parse_errors_name_the_field() {
        let err = toml::from_str::<SchedulerConfig>(r#"default_lock_at_most_for = "ten minutes""#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("default_lock_at_most_for"), "{err}");
        let err = toml::from_str::<SchedulerConfig>(r#"default_lock_at_most = "10m""#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("unknown field `default_lock_at_most`"),
            "{err}"
        );
    }
}
