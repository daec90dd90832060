//! The tick a scheduled run claims: the store grants each tick of a lock at most once.

use std::time::{Duration, SystemTime};

use shedlock_rules::MAX_DURATION;

/// The scheduled fire time a lock is claimed for, so that the store, not the instances'
/// clocks, decides whether that tick already ran.
///
/// Every instance of a fleet names a cron tick the same (its fire time, whatever the instance's
/// clock says when it fires), so the store can grant it once: a provider keeps, per lock, the
/// last tick it granted and refuses (`Ok(None)`, as for a held lock) a claim whose tick is not
/// at least its [spacing](Self::with_spacing) after it. Without a tick (a run by hand, a rerun) the
/// last tick is neither checked nor changed.
///
/// Ticks are whole milliseconds since the Unix epoch (earlier times are cut to the
/// millisecond below), as every store keeps them.
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use shedlock_core::Tick;
///
/// let nine = SystemTime::UNIX_EPOCH + Duration::from_secs(9 * 3600);
/// let tick = Tick::new(nine);
/// assert_eq!(tick.millis(), 9 * 3600 * 1000);
/// assert!(tick.follows(None, nine));
/// assert!(!tick.follows(Some(tick.millis()), nine), "granted once");
/// // A fixed-rate tick: at most one per period, in the claimants' own time.
/// let every_ten = Tick::new(nine).with_spacing(Duration::from_secs(10));
/// assert!(!every_ten.follows(Some(tick.millis() - 3_000), nine));
/// assert!(every_ten.follows(Some(tick.millis() - 10_000), nine));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tick {
    millis: i64,
    spacing_millis: i64,
    ahead_millis: i64,
}

impl Tick {
    /// The tick of fire time `at`: granted if it is later than the last tick granted for the
    /// lock (spacing one millisecond), however far ahead of the store's clock.
    pub fn new(at: SystemTime) -> Self {
        Tick {
            millis: epoch_millis(at),
            spacing_millis: 1,
            ahead_millis: duration_millis(MAX_DURATION),
        }
    }

    /// Granted only if at least `spacing` after the last tick granted (at least one
    /// millisecond): for a fixed-rate schedule, whose instances do not share fire times,
    /// its period, so that the fleet runs it at most once per period. Longer than 100 years is
    /// shortened to that.
    #[must_use]
    pub fn with_spacing(mut self, spacing: Duration) -> Self {
        self.spacing_millis = duration_millis(spacing).max(1);
        self
    }

    /// Refused while the tick lies more than `ahead` after the store's clock: an instance
    /// whose clock runs far ahead claims nothing (rather than ticks the rest of the fleet would
    /// then be refused until its clock is reached). The scheduler sets the job's period. Longer
    /// than 100 years is shortened to that.
    #[must_use]
    pub fn ahead_at_most(mut self, ahead: Duration) -> Self {
        self.ahead_millis = duration_millis(ahead);
        self
    }

    /// The fire time, in whole milliseconds since the Unix epoch (negative before it).
    pub fn millis(&self) -> i64 {
        self.millis
    }

    /// The fire time.
    pub fn time(&self) -> SystemTime {
        match u64::try_from(self.millis) {
            Ok(after) => SystemTime::UNIX_EPOCH + Duration::from_millis(after),
            Err(_) => SystemTime::UNIX_EPOCH - Duration::from_millis(self.millis.unsigned_abs()),
        }
    }

    /// The least distance to the last tick granted, in milliseconds (at least 1).
    pub fn spacing_millis(&self) -> i64 {
        self.spacing_millis
    }

    /// How far the tick may lie ahead of the store's clock, in milliseconds.
    pub fn ahead_millis(&self) -> i64 {
        self.ahead_millis
    }

    /// The rule every provider applies, on the store's clock `now`, to the lock's last granted
    /// tick `last` (`None`: never granted with a tick): `last + spacing <= tick <= now +
    /// ahead`. Providers that cannot run it in process write the same conditions in the
    /// store's language.
    pub fn follows(&self, last: Option<i64>, now: SystemTime) -> bool {
        let after_last =
            last.is_none_or(|last| self.millis >= last.saturating_add(self.spacing_millis));
        after_last && self.millis <= epoch_millis(now).saturating_add(self.ahead_millis)
    }
}

/// Milliseconds since the Unix epoch, cut to the millisecond below (negative before it),
/// saturating at the ends of `i64` (some 292 million years away).
pub(crate) fn epoch_millis(time: SystemTime) -> i64 {
    let whole = |duration: Duration| i64::try_from(duration.as_millis()).unwrap_or(i64::MAX);
    match time.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(after) => whole(after),
        Err(before) => {
            let before = before.duration();
            let cut = u128::from(before.subsec_nanos() % 1_000_000 != 0);
            i64::try_from(before.as_millis() + cut).map_or(i64::MIN, |ms| -ms)
        }
    }
}

/// A duration in whole milliseconds, saturating.
fn duration_millis(duration: Duration) -> i64 {
    i64::try_from(duration.min(MAX_DURATION).as_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_cut_to_the_millisecond_below() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_micros(1_999);
        assert_eq!(Tick::new(at).millis(), 1);
        let before = SystemTime::UNIX_EPOCH - Duration::from_micros(1_001);
        assert_eq!(Tick::new(before).millis(), -2);
        assert_eq!(
            Tick::new(before).time(),
            SystemTime::UNIX_EPOCH - Duration::from_millis(2)
        );
        let exact = SystemTime::UNIX_EPOCH - Duration::from_millis(3);
        assert_eq!(Tick::new(exact).millis(), -3);
        // Past 100 years from 1970 (no cap at MAX_DURATION): distinct ticks stay distinct.
        let year = Duration::from_secs(365 * 24 * 3600);
        let far = SystemTime::UNIX_EPOCH + 150 * year;
        assert!(Tick::new(far + Duration::from_secs(1)).millis() > Tick::new(far).millis());
    }

    #[test]
    fn granted_after_the_last_by_the_spacing_and_never_too_far_ahead() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let tick = Tick::new(now);
        assert!(tick.follows(None, now));
        assert!(tick.follows(Some(tick.millis() - 1), now));
        assert!(!tick.follows(Some(tick.millis()), now));
        assert!(!tick.follows(Some(tick.millis() + 5), now));
        let spaced = tick.with_spacing(Duration::from_secs(2));
        assert!(!spaced.follows(Some(tick.millis() - 1_999), now));
        assert!(spaced.follows(Some(tick.millis() - 2_000), now));
        assert_eq!(tick.with_spacing(Duration::ZERO).spacing_millis(), 1);
        let ahead = Tick::new(now + Duration::from_secs(2)).ahead_at_most(Duration::from_secs(1));
        assert!(!ahead.follows(None, now));
        assert!(ahead.follows(None, now + Duration::from_secs(1)));
        assert!(!Tick::new(now).follows(Some(i64::MAX), now));
    }
}
