//! When a job fires: cron in a time zone, fixed rate, or fixed delay.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex, PoisonError, Weak};
use std::time::Duration;

use chrono::{DateTime, SubsecRound, Utc};
use chrono_tz::Tz;
use croner::Cron;
use shedlock_rules::MAX_DURATION;

use crate::{Error, Tick};

/// How much earlier than its own fire time another instance may have run a cron tick (its
/// clock a little ahead, its timer a little earlier): a tick refuses the lock if it was taken
/// this long before the tick was due, or half the time to the next fire time if that is less.
pub(crate) const CRON_ALLOWANCE: Duration = Duration::from_millis(250);

/// Parses a cron expression with [`shedlock_rules::parse_cron`], as `#[scheduled(cron = …)]`
/// does at compile time (tokio-cron-scheduler's dialect: 6 fields, seconds first, an optional
/// year; a pattern that matches no date is refused).
pub(crate) fn parse_cron(expression: &str) -> Result<Cron, Error> {
    shedlock_rules::parse_cron(expression)
        .map_err(|error| Error::invalid_config("cron", error.to_string()))
}

/// The parsed pattern of `expression`, shared with every other `Schedule` on the same
/// expression that is still alive: croner keeps about 5.8 KB per pattern (a byte per possible
/// value of each field), so 10,000 jobs on a handful of expressions would otherwise hold 58 MB
/// of identical patterns. Patterns no schedule uses any more are freed. The expression's text
/// is shared too.
fn interned_cron(expression: &str) -> Result<(Arc<Cron>, Arc<str>), Error> {
    type Patterns = HashMap<Arc<str>, Weak<Cron>>;
    static PATTERNS: LazyLock<Mutex<Patterns>> = LazyLock::new(Mutex::default);
    let mut patterns = PATTERNS.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((text, cron)) = patterns.get_key_value(expression)
        && let Some(cron) = cron.upgrade()
    {
        return Ok((cron, Arc::clone(text)));
    }
    let cron = Arc::new(parse_cron(expression)?);
    if patterns.len() >= 64 && patterns.len().is_power_of_two() {
        patterns.retain(|_, pattern| pattern.strong_count() > 0);
    }
    let text: Arc<str> = Arc::from(expression);
    patterns.insert(Arc::clone(&text), Arc::downgrade(&cron));
    Ok((cron, text))
}

/// Parses an IANA time zone ([`shedlock_rules::parse_zone`]) as the field `field`.
pub(crate) fn parse_zone(field: &'static str, zone: &str) -> Result<Tz, Error> {
    shedlock_rules::parse_zone(zone)
        .map_err(|error| Error::invalid_config(field, error.to_string()))
}

/// Checks a positive duration ([`shedlock_rules::check_period`]: `0 < value <= 100 years`) as
/// the field `field`.
pub(crate) fn check_period(field: &'static str, value: Duration) -> Result<Duration, Error> {
    shedlock_rules::check_period(value)
        .map_err(|error| Error::invalid_config(field, error.to_string()))
}

/// When a job fires.
///
/// ```
/// use std::time::Duration;
/// use shedlock_runtime::Schedule;
///
/// let nightly = Schedule::cron("0 30 2 * * *")?.in_zone("Europe/Berlin")?;
/// let every_minute = Schedule::fixed_rate(Duration::from_secs(60))?.with_initial_delay(Duration::from_secs(5));
/// assert!(Schedule::cron("*/5 * * * *").is_err(), "5 fields: seconds are required");
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[derive(Clone)]
pub struct Schedule {
    pub(crate) kind: ScheduleKind,
    pub(crate) initial_delay: Duration,
    /// `None`: the scheduler's `misfire_threshold`.
    pub(crate) misfire_threshold: Option<Duration>,
    /// Run the latest tick the whole fleet missed, if at most this old, at start.
    pub(crate) catch_up: Option<Duration>,
}

#[derive(Clone)]
pub(crate) enum ScheduleKind {
    Cron {
        cron: Arc<Cron>,
        expression: Arc<str>,
        /// `None`: the scheduler's default zone.
        zone: Option<Tz>,
    },
    FixedRate(Duration),
    FixedDelay(Duration),
}

impl Schedule {
    /// A cron schedule: 6 fields, seconds first (`"0 */5 * * * *"`), in the scheduler's default
    /// time zone unless [`in_zone`](Self::in_zone) sets one.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`cron`) when the expression does not parse, or matches no date
    /// at all (`"0 0 0 31 2 *"`), so that its job would never fire.
    pub fn cron(expression: &str) -> Result<Self, Error> {
        let (cron, expression) = interned_cron(expression)?;
        Ok(Schedule::of_checked(ScheduleKind::Cron {
            cron,
            expression,
            zone: None,
        }))
    }

    /// A schedule of `kind`, already checked, with every other setting at its default (also
    /// for the attribute macros' checked values, `__private`).
    pub(crate) fn of_checked(kind: ScheduleKind) -> Self {
        Schedule {
            kind,
            initial_delay: Duration::ZERO,
            misfire_threshold: None,
            catch_up: None,
        }
    }

    /// Sets the IANA time zone a cron schedule is read in (`"Europe/Berlin"`). Daylight-saving
    /// changes are followed: the offset is looked up for every fire time.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`zone`) for an unknown zone, or when the schedule is not cron.
    pub fn in_zone(mut self, zone: &str) -> Result<Self, Error> {
        let tz = parse_zone("zone", zone)?;
        match &mut self.kind {
            ScheduleKind::Cron { zone, .. } => *zone = Some(tz),
            _ => {
                return Err(Error::invalid_config(
                    "zone",
                    "a time zone applies only to cron schedules",
                ));
            }
        }
        Ok(self)
    }

    /// Fires every `period`, measured from start to start. A run still going when the next
    /// start is due makes that start skip (no self-overlap); missed starts are not replayed.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`fixed_rate`) when `period` is zero or over 100 years.
    pub fn fixed_rate(period: Duration) -> Result<Self, Error> {
        check_period("fixed_rate", period)?;
        Ok(Schedule::of_checked(ScheduleKind::FixedRate(period)))
    }

    /// Fires `delay` after the previous run ended.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`fixed_delay`) when `delay` is zero or over 100 years.
    pub fn fixed_delay(delay: Duration) -> Result<Self, Error> {
        check_period("fixed_delay", delay)?;
        Ok(Schedule::of_checked(ScheduleKind::FixedDelay(delay)))
    }

    /// Waits this long after the scheduler starts before the first fire (at most 100 years;
    /// longer is shortened to that).
    pub fn with_initial_delay(mut self, initial_delay: Duration) -> Self {
        self.initial_delay = initial_delay.min(MAX_DURATION);
        self
    }

    /// A tick that would start more than `threshold` after its fire time is not run but counted
    /// as missed (instead of the scheduler's `misfire_threshold`). Lateness is measured on this
    /// process's monotonic clock.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`misfire_threshold`) when zero or over 100 years.
    pub fn with_misfire_threshold(mut self, threshold: Duration) -> Result<Self, Error> {
        check_period("misfire_threshold", threshold)?;
        self.misfire_threshold = Some(threshold);
        Ok(self)
    }

    /// Catch-up after a fleet-wide outage: when the scheduler starts and the latest fire time
    /// of this cron schedule before now passed no more than `within` ago, and no instance took
    /// the job's lock since that fire time (nobody ran it: every instance was down, or the
    /// store was), the tick runs once, now. Exactly once across the fleet (the lock's
    /// acquisition time decides) and read in the schedule's zone, daylight-saving changes
    /// included. Only the latest missed tick runs, never a backlog; the job needs a lock.
    ///
    /// ```
    /// use std::time::Duration;
    /// use shedlock_runtime::Schedule;
    ///
    /// // Run last night's report at start if it was missed less than 6 hours ago.
    /// let nightly = Schedule::cron("0 0 2 * * *")?.with_catch_up(Duration::from_secs(6 * 3600))?;
    /// # Ok::<(), shedlock_core::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`catch_up`) when `within` is zero or over 100 years, or the
    /// schedule is not cron.
    pub fn with_catch_up(mut self, within: Duration) -> Result<Self, Error> {
        if !matches!(self.kind, ScheduleKind::Cron { .. }) {
            return Err(Error::invalid_config(
                "catch_up",
                "applies only to cron schedules",
            ));
        }
        check_period("catch_up", within)?;
        self.catch_up = Some(within);
        Ok(self)
    }

    /// How old a missed tick may be to be caught up at start; `None`: no catch-up.
    pub fn catch_up(&self) -> Option<Duration> {
        self.catch_up
    }

    /// The latest cron fire time at or before `now`, read in the schedule's zone (or
    /// `default_zone`); `None` for other schedules or when the pattern never matched.
    pub(crate) fn latest_fire(
        &self,
        now: DateTime<Utc>,
        default_zone: Tz,
    ) -> Option<DateTime<Utc>> {
        let ScheduleKind::Cron { cron, zone, .. } = &self.kind else {
            return None;
        };
        let zone = zone.unwrap_or(default_zone);
        cron.find_previous_occurrence(&now.trunc_subsecs(0).with_timezone(&zone), true)
            .ok()
            .map(|fire| fire.with_timezone(&Utc))
    }

    /// The expression of a cron schedule, as written; `None` for fixed-rate and fixed-delay
    /// schedules.
    pub fn cron_expression(&self) -> Option<&str> {
        match &self.kind {
            ScheduleKind::Cron { expression, .. } => Some(expression),
            _ => None,
        }
    }

    /// The zone a cron schedule is read in, if it names one; `None` means the scheduler's
    /// `default_zone` (and is always `None` for non-cron schedules).
    pub fn zone(&self) -> Option<Tz> {
        match &self.kind {
            ScheduleKind::Cron { zone, .. } => *zone,
            _ => None,
        }
    }

    /// How long after the scheduler starts the first fire waits (zero unless
    /// [`with_initial_delay`](Self::with_initial_delay) set it).
    pub fn initial_delay(&self) -> Duration {
        self.initial_delay
    }

    /// The misfire threshold the schedule sets for itself, if any; `None` means the
    /// scheduler's `misfire_threshold`.
    pub fn misfire_threshold(&self) -> Option<Duration> {
        self.misfire_threshold
    }

    /// The first cron fire time strictly after `after`, read in the schedule's zone (or
    /// `default_zone`). `None` for non-cron schedules or when the pattern never matches again.
    pub fn next_cron_fire(&self, after: DateTime<Utc>, default_zone: Tz) -> Option<DateTime<Utc>> {
        let ScheduleKind::Cron { cron, zone, .. } = &self.kind else {
            return None;
        };
        let zone = zone.unwrap_or(default_zone);
        // Cron has whole seconds; croner would carry `after`'s fraction into the result.
        let after = after.trunc_subsecs(0);
        cron.find_next_occurrence(&after.with_timezone(&zone), false)
            .ok()
            .map(|fire| fire.with_timezone(&Utc))
    }
}

impl Schedule {
    /// For a run of this cron schedule's latest tick (its latest fire time at or before now, in
    /// its zone or `default_zone`): the instant, on this process's monotonic clock, since which
    /// an acquisition of the job's lock by any instance means that tick has run already. It is
    /// the fire time less the allowance shedlock's own scheduler gives instances whose clocks
    /// or timers differ (250 ms, or half the time between fire times when that is less). Pass
    /// it to [`LockConfiguration::unless_acquired_since`](shedlock_core::LockConfiguration::unless_acquired_since)
    /// to run a tick fired late (a runner that polls, a paused process) only if no instance
    /// ran it meanwhile. `None` for fixed-rate and fixed-delay schedules.
    pub fn latest_tick_since(&self, default_zone: Tz) -> Option<tokio::time::Instant> {
        let (now, mono) = (Utc::now(), tokio::time::Instant::now());
        let (fire, gap) = self.latest_fire_and_gap(now, default_zone)?;
        let late = (now - fire).to_std().unwrap_or_default();
        mono.checked_sub(late + CRON_ALLOWANCE.min(gap / 2))
    }

    /// The claim of this cron schedule's latest tick (its latest fire time at or before now, in
    /// its zone or `default_zone`), as shedlock's own scheduler makes it: pass it to
    /// [`LockConfiguration::for_tick`](shedlock_core::LockConfiguration::for_tick) so that the
    /// store grants that tick once across instances, whatever their clocks. `None` for
    /// fixed-rate and fixed-delay schedules.
    pub fn latest_tick(&self, default_zone: Tz) -> Option<Tick> {
        let (fire, gap) = self.latest_fire_and_gap(Utc::now(), default_zone)?;
        Some(cron_tick(fire, gap))
    }

    /// The latest cron fire time at or before `now` and the time to the next one.
    fn latest_fire_and_gap(
        &self,
        now: DateTime<Utc>,
        default_zone: Tz,
    ) -> Option<(DateTime<Utc>, Duration)> {
        let fire = self.latest_fire(now, default_zone)?;
        let gap = self
            .next_cron_fire(fire, default_zone)
            .and_then(|next| (next - fire).to_std().ok())
            .unwrap_or(MAX_DURATION);
        Some((fire, gap))
    }
}

/// The claim of cron fire time `fire`, the next one `gap` later: granted once (every instance
/// names it the same), to an instance whose clock runs at most `gap` ahead of the store's.
pub(crate) fn cron_tick(fire: DateTime<Utc>, gap: Duration) -> Tick {
    Tick::new(fire.into()).ahead_at_most(gap)
}

impl fmt::Debug for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ScheduleKind::Cron {
                expression, zone, ..
            } => {
                write!(f, "cron \"{expression}\"")?;
                if let Some(zone) = zone {
                    write!(f, " in {zone}")?;
                }
            }
            ScheduleKind::FixedRate(period) => {
                write!(f, "every {}", humantime::format_duration(*period))?
            }
            ScheduleKind::FixedDelay(delay) => write!(
                f,
                "{} after the previous run",
                humantime::format_duration(*delay)
            )?,
        }
        if !self.initial_delay.is_zero() {
            write!(
                f,
                ", first after {}",
                humantime::format_duration(self.initial_delay)
            )?;
        }
        if let Some(threshold) = self.misfire_threshold {
            write!(
                f,
                ", missed when {} late",
                humantime::format_duration(threshold)
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{FixedOffset, Offset, TimeZone};

    fn utc(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    #[test]
    fn zoned_cron_follows_daylight_saving_changes() {
        let nine_in_berlin = Schedule::cron("0 0 9 * * *")
            .unwrap()
            .in_zone("Europe/Berlin")
            .unwrap();
        let fire = |after| nine_in_berlin.next_cron_fire(utc(after), Tz::UTC).unwrap();
        // Before the spring change: 09:00 CET is 08:00 UTC.
        assert_eq!(fire("2026-03-28T00:00:00Z"), utc("2026-03-28T08:00:00Z"));
        // The day of the change (02:00 CET -> 03:00 CEST): 09:00 CEST is 07:00 UTC.
        assert_eq!(fire("2026-03-28T12:00:00Z"), utc("2026-03-29T07:00:00Z"));
        // Autumn (03:00 CEST -> 02:00 CET): back to 08:00 UTC.
        assert_eq!(fire("2026-10-24T12:00:00Z"), utc("2026-10-25T08:00:00Z"));
    }

    #[test]
    fn a_frozen_offset_would_be_an_hour_off() {
        // What tokio-cron-scheduler 0.15 does: take the zone's offset once, at job creation
        // (here in winter), and keep it. After the change it fires at 10:00 Berlin time.
        let cron = parse_cron("0 0 9 * * *").unwrap();
        let created = utc("2026-03-01T00:00:00Z");
        let frozen: FixedOffset = Tz::Europe__Berlin
            .offset_from_utc_datetime(&created.naive_utc())
            .fix();
        let frozen_fire = cron
            .find_next_occurrence(&utc("2026-03-30T00:00:00Z").with_timezone(&frozen), false)
            .unwrap()
            .with_timezone(&Utc);
        let ours = Schedule::cron("0 0 9 * * *")
            .unwrap()
            .in_zone("Europe/Berlin")
            .unwrap();
        let ours = ours
            .next_cron_fire(utc("2026-03-30T00:00:00Z"), Tz::UTC)
            .unwrap();
        assert_eq!(frozen_fire, utc("2026-03-30T08:00:00Z"));
        assert_eq!(ours, utc("2026-03-30T07:00:00Z"));
    }

    #[test]
    fn fire_times_are_whole_seconds_whatever_the_start() {
        let every_five = Schedule::cron("*/5 * * * * *").unwrap();
        let fire = every_five
            .next_cron_fire(utc("2026-07-01T10:00:40.530Z"), Tz::UTC)
            .unwrap();
        assert_eq!(fire, utc("2026-07-01T10:00:45Z"));
        let fire = every_five
            .next_cron_fire(utc("2026-07-01T10:00:44.999Z"), Tz::UTC)
            .unwrap();
        assert_eq!(fire, utc("2026-07-01T10:00:45Z"));
        let fire = every_five
            .next_cron_fire(utc("2026-07-01T10:00:45Z"), Tz::UTC)
            .unwrap();
        assert_eq!(fire, utc("2026-07-01T10:00:50Z"), "strictly after");
    }

    #[test]
    fn default_zone_applies_when_none_is_set() {
        let nine = Schedule::cron("0 0 9 * * *").unwrap();
        let fire = nine
            .next_cron_fire(utc("2026-07-01T00:00:00Z"), Tz::America__New_York)
            .unwrap();
        assert_eq!(fire, utc("2026-07-01T13:00:00Z"));
    }

    #[test]
    fn parts_are_readable() {
        let nightly = Schedule::cron("0 30 2 * * *")
            .unwrap()
            .in_zone("Europe/Berlin")
            .unwrap()
            .with_initial_delay(Duration::from_secs(5));
        assert_eq!(nightly.cron_expression(), Some("0 30 2 * * *"));
        assert_eq!(nightly.zone(), Some(Tz::Europe__Berlin));
        assert_eq!(nightly.initial_delay(), Duration::from_secs(5));
        assert_eq!(nightly.misfire_threshold(), None);
        let strict = nightly
            .with_misfire_threshold(Duration::from_secs(10))
            .unwrap();
        assert_eq!(strict.misfire_threshold(), Some(Duration::from_secs(10)));
        let every_minute = Schedule::fixed_rate(Duration::from_secs(60)).unwrap();
        assert_eq!(every_minute.cron_expression(), None);
        assert_eq!(every_minute.zone(), None);
        assert_eq!(every_minute.initial_delay(), Duration::ZERO);
    }

    #[test]
    fn cron_dialect_matches_tokio_cron_scheduler() {
        assert!(Schedule::cron("0 0 9 * * *").is_ok());
        assert!(
            Schedule::cron("0 0 9 * * * 2030").is_ok(),
            "optional year field"
        );
        let err = Schedule::cron("0 9 * * *").unwrap_err().to_string();
        assert!(err.starts_with("invalid `cron`"), "{err}");
        assert!(matches!(
            Schedule::fixed_rate(Duration::ZERO),
            Err(Error::InvalidConfig {
                field: "fixed_rate",
                ..
            })
        ));
        assert!(matches!(
            Schedule::fixed_rate(Duration::from_secs(1))
                .unwrap()
                .in_zone("UTC"),
            Err(Error::InvalidConfig { field: "zone", .. })
        ));
    }

    #[test]
    fn a_pattern_that_matches_no_date_is_refused() {
        let Err(Error::InvalidConfig { field, message }) = Schedule::cron("0 0 0 30 2 *") else {
            panic!("February 30th accepted");
        };
        assert_eq!(field, "cron");
        assert_eq!(
            message,
            "\"0 0 0 30 2 *\": matches no date: day 30 of February never occurs, so it would never fire"
        );
        // The leap day is a date; it fires in the next leap year, in any zone.
        let leap_day = Schedule::cron("0 0 12 29 2 *").unwrap();
        let fire = leap_day.next_cron_fire(utc("2026-03-01T00:00:00Z"), Tz::UTC);
        assert_eq!(fire, Some(utc("2028-02-29T12:00:00Z")));
        // 02:30 never happens in Berlin on the last Sunday of March: valid in UTC, so valid in
        // Berlin, where croner runs it just after the gap.
        let in_the_gap = Schedule::cron("0 30 2 * 3 SUN#L")
            .unwrap()
            .in_zone("Europe/Berlin")
            .unwrap();
        let fire = in_the_gap.next_cron_fire(utc("2026-03-01T00:00:00Z"), Tz::UTC);
        assert_eq!(fire, Some(utc("2026-03-29T01:00:00Z")));
    }

    #[test]
    fn schedules_on_one_expression_share_its_pattern() {
        let cron = |s: &Schedule| match &s.kind {
            ScheduleKind::Cron { cron, .. } => Arc::clone(cron),
            _ => unreachable!(),
        };
        let (a, b) = (
            Schedule::cron("0 15 3 * * *").unwrap(),
            Schedule::cron("0 15 3 * * *")
                .unwrap()
                .in_zone("Europe/Berlin")
                .unwrap(),
        );
        assert!(Arc::ptr_eq(&cron(&a), &cron(&b)));
        let other = Schedule::cron("0 16 3 * * *").unwrap();
        assert!(!Arc::ptr_eq(&cron(&a), &cron(&other)));
        let fire = utc("2026-05-01T00:00:00Z");
        assert_eq!(
            a.next_cron_fire(fire, Tz::UTC),
            Some(utc("2026-05-01T03:15:00Z"))
        );
    }
}
