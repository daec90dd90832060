//! Where a job is in its schedule on the timer, and where a replacement of its definition
//! takes over from it.

use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use crate::Schedule;
use crate::scheduler::schedule::ScheduleKind;

/// Where a job is in its schedule.
#[derive(Debug)]
pub(super) enum Plan {
    /// Before its first tick: the initial delay runs.
    Start,
    /// Cron: the latest fire time handled; the next is computed from it in the job's zone, so
    /// daylight-saving changes are followed (the offset is never cached).
    Cron { after: DateTime<Utc> },
    /// Fixed rate on a grid `origin + k × period`, named on the wall clock from `wall_origin`;
    /// `index` is the tick fired last, or, while none runs, the next one queued.
    Rate {
        period: Duration,
        origin: Instant,
        wall_origin: SystemTime,
        index: u32,
    },
    /// Fixed delay: the next tick comes this long after the last one ended.
    Delay(Duration),
    /// No further fire time.
    Done,
}

impl Plan {
    /// Where a new definition of the job, on `schedule`, starts from this plan (the old
    /// definition's), at `now` (`wall_now` on the wall clock); `running`: the old definition's
    /// tick is in flight (so `Rate::index` is the tick fired last).
    ///
    /// Its first fire time comes after the old definition's latest tick and after the change:
    /// cron from the later of the two; a fixed rate on a grid from the old latest tick (its
    /// first tick one new period after it); a fixed delay from the change. A job that had not
    /// fired yet (or had no fire time left) starts afresh.
    pub(super) fn replaced(
        &self,
        schedule: &Schedule,
        running: bool,
        now: Instant,
        wall_now: SystemTime,
    ) -> Plan {
        let latest: Option<(Instant, SystemTime)> = match *self {
            Plan::Start | Plan::Done => return Plan::Start,
            Plan::Cron { after } => {
                let wall = SystemTime::from(after);
                let ago = wall_now.duration_since(wall).unwrap_or_default();
                Some((now.checked_sub(ago).unwrap_or(now), wall))
            }
            Plan::Rate {
                period,
                origin,
                wall_origin,
                index,
            } => {
                let fired = if running {
                    index
                } else {
                    index.saturating_sub(1)
                };
                grid(origin, period, fired).zip(
                    period
                        .checked_mul(fired)
                        .and_then(|d| wall_origin.checked_add(d)),
                )
            }
            Plan::Delay(_) => None,
        };
        match schedule.kind {
            ScheduleKind::Cron { .. } => {
                let after = latest.map_or(wall_now, |(_, wall)| wall.max(wall_now));
                Plan::Cron {
                    after: after.into(),
                }
            }
            ScheduleKind::FixedRate(period) => {
                let (origin, wall_origin) = latest.unwrap_or((now, wall_now));
                Plan::Rate {
                    period,
                    origin,
                    wall_origin,
                    index: 0,
                }
            }
            ScheduleKind::FixedDelay(delay) => Plan::Delay(delay),
        }
    }
}

/// The fixed-rate grid's tick `index`: `origin + index × period`, if the clock reaches it.
pub(super) fn grid(origin: Instant, period: Duration, index: u32) -> Option<Instant> {
    period
        .checked_mul(index)
        .and_then(|d| origin.checked_add(d))
}

/// The grid index of the latest tick due at `now`.
pub(super) fn grid_index(origin: Instant, period: Duration, now: Instant) -> u32 {
    u32::try_from(now.saturating_duration_since(origin).as_nanos() / period.as_nanos())
        .unwrap_or(u32::MAX)
}

/// The grid's next tick after `index` that is not due yet at `now`: ticks that passed
/// meanwhile are skipped.
pub(super) fn next_on_grid(origin: Instant, period: Duration, index: u32, now: Instant) -> u32 {
    grid_index(origin, period, now)
        .saturating_add(1)
        .max(index.saturating_add(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: SystemTime = SystemTime::UNIX_EPOCH;

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_cron_replacement_starts_after_the_old_latest_tick_and_the_change() {
        let now = Instant::now();
        let cron = Schedule::cron("* * * * * *").unwrap();
        let after: DateTime<Utc> = (T0 + secs(100)).into();
        // The old definition handled the tick at 100 s; the change comes at 100.5 s.
        let change = T0 + secs(100) + secs(1) / 2;
        let plan = Plan::Cron { after }.replaced(&cron, true, now, change);
        assert!(matches!(plan, Plan::Cron { after } if SystemTime::from(after) == change));
        // A wall clock stepped back: never before the old latest tick.
        let plan = Plan::Cron { after }.replaced(&cron, false, now, T0 + secs(90));
        assert!(matches!(plan, Plan::Cron { after: a } if a == after));
    }

    #[test]
    fn a_fixed_rate_replacement_continues_from_the_old_latest_tick() {
        let origin = Instant::now();
        let old = Plan::Rate {
            period: secs(10),
            origin,
            wall_origin: T0,
            index: 3,
        };
        let rate = Schedule::fixed_rate(secs(4)).unwrap();
        // Idle: tick 3 is queued, tick 2 (20 s) was the latest.
        let Plan::Rate {
            origin: new_origin,
            wall_origin,
            index,
            ..
        } = old.replaced(&rate, false, origin + secs(25), T0 + secs(25))
        else {
            panic!("a fixed rate");
        };
        assert_eq!(
            (new_origin, wall_origin, index),
            (origin + secs(20), T0 + secs(20), 0)
        );
        assert_eq!(next_on_grid(new_origin, secs(4), 0, origin + secs(25)), 2);
        // Running: tick 3 (30 s) was fired.
        let Plan::Rate { wall_origin, .. } = old.replaced(&rate, true, origin + secs(31), T0)
        else {
            panic!("a fixed rate");
        };
        assert_eq!(wall_origin, T0 + secs(30));
    }

    #[test]
    fn a_job_that_never_fired_starts_afresh() {
        let delay = Schedule::fixed_delay(secs(1)).unwrap();
        let plan = Plan::Start.replaced(&delay, false, Instant::now(), T0);
        assert!(matches!(plan, Plan::Start));
        let plan = Plan::Delay(secs(5)).replaced(&delay, false, Instant::now(), T0);
        assert!(matches!(plan, Plan::Delay(d) if d == secs(1)));
    }
}
