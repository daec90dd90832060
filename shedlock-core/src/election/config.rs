//! Timing of lease-based elections, with client-go's names, defaults and rules.

use std::time::Duration;

use serde::Deserialize;

use crate::Error;

/// Timing of a leader election (client-go's names and defaults: 15 s / 10 s / 2 s).
///
/// Lease-based elections (on any [`LockProvider`](crate::LockProvider)) use all three fields;
/// other electors say which they use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ElectionConfig {
    /// How long a lease lasts in the store without renewal; a crashed leader is replaced after
    /// at most this plus one retry period.
    #[serde(with = "shedlock_rules::serde_duration")]
    pub lease_duration: Duration,
    /// How long the leader trusts its leadership after the last renewal request that succeeded
    /// (counted from when that request was sent, on this instance's monotonic clock). Past it,
    /// the leader steps down before anything else happens, even right after a process pause.
    #[serde(with = "shedlock_rules::serde_duration")]
    pub renew_deadline: Duration,
    /// How often the leader renews and followers retry (followers add up to 20 % jitter).
    #[serde(with = "shedlock_rules::serde_duration")]
    pub retry_period: Duration,
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl ElectionConfig {
    /// Checks `lease_duration > renew_deadline > 1.2 × retry_period > 0`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field that breaks the rule.
    pub fn validate(&self) -> Result<(), Error> {
        if self.retry_period.is_zero() {
            return Err(Error::invalid_config(
                "retry_period",
                "must be greater than zero",
            ));
        }
        shedlock_rules::check_duration(self.lease_duration)
            .map_err(|error| Error::invalid_config("lease_duration", error.to_string()))?;
        // In floating point: `retry_period × 1.2` may not fit a Duration.
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * 1.2 {
            return Err(Error::invalid_config(
                "renew_deadline",
                "must be longer than 1.2 × retry_period",
            ));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::invalid_config(
                "lease_duration",
                "must be longer than renew_deadline",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_rules_of_client_go() {
        ElectionConfig::default().validate().unwrap();
        let s = Duration::from_secs;
        let field = |lease, renew, retry| match (ElectionConfig {
            lease_duration: s(lease),
            renew_deadline: s(renew),
            retry_period: s(retry),
        })
        .validate()
        {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(10, 10, 2), "lease_duration");
        assert_eq!(field(15, 12, 10), "renew_deadline");
        assert_eq!(field(15, 10, 0), "retry_period");
        let huge = Duration::MAX;
        let config = ElectionConfig {
            lease_duration: huge,
            renew_deadline: huge,
            retry_period: huge,
        };
        assert!(config.validate().is_err(), "an error, not a panic");
    }
}
