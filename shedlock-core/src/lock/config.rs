//! What to lock and for how long.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use shedlock_rules::MAX_DURATION;

use crate::{Error, Tick};

/// The name of a lock and its two durations, validated on construction.
///
/// - `lock_at_most_for`: the lease. If the holder dies, the lock frees itself after this long.
/// - `lock_at_least_for`: the minimum time the lock stays taken, even when the job ends earlier.
///   It stops fast jobs from running again on an instance whose trigger fires a little later.
/// - [`unless_acquired_within`](Self::unless_acquired_within) or
///   [`unless_acquired_since`](Self::unless_acquired_since) (optional, none by default): refuse
///   the lock, even when it is free, if anyone acquired it this recently. The scheduler sets it
///   for each tick so that a tick that starts late never runs work another instance already did
///   for it.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::LockConfiguration;
///
/// let config = LockConfiguration::new("nightly_report", Duration::from_secs(600), Duration::from_secs(30))?;
/// assert_eq!(config.name(), "nightly_report");
/// assert!(LockConfiguration::new("", Duration::from_secs(1), Duration::ZERO).is_err());
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockConfiguration {
    name: Arc<str>,
    lock_at_most_for: Duration,
    lock_at_least_for: Duration,
    recent: Option<Recent>,
    tick: Option<Tick>,
}

/// The acquisition condition of `unless_acquired_*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Recent {
    /// A fixed window back from the store's now.
    Within(Duration),
    /// Since an instant of this process.
    Since(Instant),
}

impl LockConfiguration {
    /// Validates and builds a lock configuration.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field when the name is empty, longer than
    /// [`MAX_LOCK_NAME_LEN`](crate::MAX_LOCK_NAME_LEN) bytes or holds control characters, when
    /// `lock_at_most_for` is zero or over 100 years, or when `lock_at_least_for` exceeds
    /// `lock_at_most_for`.
    pub fn new(
        name: impl Into<String>,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Self, Error> {
        let name = name.into();
        validate_lock_name("name", &name)?;
        validate_durations(lock_at_most_for, lock_at_least_for)?;
        Ok(LockConfiguration {
            name: name.into(),
            lock_at_most_for,
            lock_at_least_for,
            recent: None,
            tick: None,
        })
    }

    /// The same lock, acquired only if nobody (this holder included) acquired it within the last
    /// `window` of store time: a free lock whose latest acquisition is more recent than
    /// `now - window` is refused like a held one (`Ok(None)`). Longer than 100 years is
    /// shortened to that.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_core::{InMemoryLockProvider, LockConfiguration, LockProvider};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), shedlock_core::Error> {
    /// let provider = InMemoryLockProvider::new();
    /// let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO)?;
    /// let lease = provider.acquire(&config).await?.expect("free");
    /// provider.release(&lease).await?;
    /// // Free again, but taken a moment ago: refused within a 5-second window.
    /// let late = config.clone().unless_acquired_within(Duration::from_secs(5));
    /// assert!(provider.acquire(&late).await?.is_none());
    /// assert!(provider.acquire(&config).await?.is_some());
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn unless_acquired_within(mut self, window: Duration) -> Self {
        self.recent = Some(Recent::Within(window.min(MAX_DURATION)));
        self
    }

    /// The same lock, acquired only if nobody acquired it since `since`, an instant on this
    /// process's monotonic clock: the window grows with the time that passes until the request
    /// is sent, so waiting for a connection never shortens it. A scheduled tick that starts
    /// late uses it with the moment it was due, to act as if it had asked on time: the work
    /// another instance did for that tick meanwhile counts as done.
    #[must_use]
    pub fn unless_acquired_since(mut self, since: Instant) -> Self {
        self.recent = Some(Recent::Since(since));
        self
    }

    /// The window set by [`unless_acquired_within`](Self::unless_acquired_within) or
    /// [`unless_acquired_since`](Self::unless_acquired_since), as of now: zero (no condition)
    /// unless set. Providers refuse the lock when its `locked_at > now - window` (store time),
    /// and read this right before they send the request.
    pub fn acquired_within_window(&self) -> Duration {
        match self.recent {
            None => Duration::ZERO,
            Some(Recent::Within(window)) => window,
            Some(Recent::Since(since)) => Instant::now()
                .saturating_duration_since(since)
                .min(MAX_DURATION),
        }
    }

    /// The same lock, claimed for `tick`: refused (`Ok(None)`), even when free, unless the
    /// tick comes at least its spacing after the last tick the store granted for this lock
    /// (and lies no further ahead of the store's clock than it allows); on a grant the store
    /// keeps it as the lock's last tick. The scheduler claims each cron and fixed-rate tick so,
    /// so that instances whose clocks differ never run one tick twice.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use shedlock_core::{InMemoryLockProvider, LockConfiguration, LockProvider, Tick};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), shedlock_core::Error> {
    /// let a = InMemoryLockProvider::new();
    /// let b = a.with_holder("b");
    /// let config = LockConfiguration::new("report", Duration::from_secs(60), Duration::ZERO)?;
    /// let nine = Tick::new(SystemTime::now());
    /// let lease = a.acquire(&config.clone().for_tick(nine)).await?.expect("free");
    /// a.release(&lease).await?;
    /// // Free again, but this tick was granted: refused to any instance, however late it fires.
    /// assert!(b.acquire(&config.clone().for_tick(nine)).await?.is_none());
    /// assert!(b.acquire(&config).await?.is_some(), "a run by hand claims no tick");
    /// # Ok(())
    /// # }
    /// ```
    #[must_use]
    pub fn for_tick(mut self, tick: Tick) -> Self {
        self.tick = Some(tick);
        self
    }

    /// The tick set by [`for_tick`](Self::for_tick), if any.
    pub fn tick(&self) -> Option<Tick> {
        self.tick
    }

    /// The lock's name, unique per protected task.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// How long the lease lasts if it is neither released nor extended.
    pub fn lock_at_most_for(&self) -> Duration {
        self.lock_at_most_for
    }

    /// The minimum time the lock stays taken after acquisition.
    pub fn lock_at_least_for(&self) -> Duration {
        self.lock_at_least_for
    }

    /// The same lock with a shorter lease `lease` (a heartbeat lease, renewed while the job
    /// runs), never shorter than `lock_at_least_for` nor longer than `lock_at_most_for`.
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lock_at_most_for = lease.max(self.lock_at_least_for).min(self.lock_at_most_for);
        self
    }

    /// The lock's name, shared (no copy).
    pub fn shared_name(&self) -> Arc<str> {
        Arc::clone(&self.name)
    }
}

/// Checks a lock name ([`shedlock_rules::check_lock_name`]) as the field `field`.
pub fn validate_lock_name(field: &'static str, name: &str) -> Result<(), Error> {
    shedlock_rules::check_lock_name(name)
        .map_err(|error| Error::invalid_config(field, error.to_string()))
}

/// Checks `0 < lock_at_most_for <= 100 years` and `lock_at_least_for <= lock_at_most_for`
/// (`shedlock_rules`, as the `#[scheduler_lock]` attribute does).
pub fn validate_durations(
    lock_at_most_for: Duration,
    lock_at_least_for: Duration,
) -> Result<(), Error> {
    shedlock_rules::check_period(lock_at_most_for)
        .map_err(|error| Error::invalid_config("lock_at_most_for", error.to_string()))?;
    shedlock_rules::check_at_least(lock_at_least_for, lock_at_most_for, "lock_at_most_for")
        .map_err(|error| Error::invalid_config("lock_at_least_for", error.to_string()))?;
    Ok(())
}

/// Checks a keep-alive interval against the lease it extends: `0 < interval <=
/// lock_at_most_for / 2` (ShedLock's keep-alive extends every half lease). Longer, the first
/// extension comes too close to the lease's local deadline (1% plus 2 ms before its end), or
/// after it: the run would be marked lost before it is ever extended. `lease` names the
/// duration in the message (e.g. "lock_at_most_for of job `report`").
pub fn validate_keep_alive_interval(
    interval: Duration,
    lock_at_most_for: Duration,
    lease: &str,
) -> Result<(), Error> {
    if interval.is_zero() || interval > lock_at_most_for / 2 {
        return Err(Error::invalid_config(
            "keep_alive_interval",
            format!(
                "{} must be greater than zero and at most half of the {lease} ({})",
                humantime::format_duration(interval),
                humantime::format_duration(lock_at_most_for)
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field_of(result: Result<LockConfiguration, Error>) -> &'static str {
        match result {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("expected InvalidConfig, got {other:?}"),
        }
    }

    #[test]
    fn rejects_bad_values_naming_the_field() {
        let s = Duration::from_secs;
        assert_eq!(field_of(LockConfiguration::new("", s(1), s(0))), "name");
        assert_eq!(
            field_of(LockConfiguration::new("a".repeat(65), s(1), s(0))),
            "name"
        );
        assert_eq!(field_of(LockConfiguration::new("a\nb", s(1), s(0))), "name");
        assert_eq!(
            field_of(LockConfiguration::new("a", Duration::ZERO, s(0))),
            "lock_at_most_for"
        );
        assert_eq!(
            field_of(LockConfiguration::new("a", s(1), s(2))),
            "lock_at_least_for"
        );
        assert_eq!(
            field_of(LockConfiguration::new("a", Duration::MAX, s(0))),
            "lock_at_most_for"
        );
    }

    #[test]
    fn accepts_limits() {
        let s = Duration::from_secs;
        assert!(LockConfiguration::new("a".repeat(64), s(1), s(1)).is_ok());
        assert!(LockConfiguration::new("ünïcode ✓", s(1), s(0)).is_ok());
    }
}
