//! One task per job: wait for the next fire time, then run one tick. Runs never overlap within
//! an instance: fire times that pass while a run is going are skipped and logged. After a pause
//! (the process stopped, the host overloaded) only the latest fire time that has passed is
//! considered; the earlier ones are counted as missed.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use tokio::time::Instant;

use super::recovery::Follow;
use super::runtime::{Due, PreparedJob, Runtime};
use super::status::JobState;
use crate::Tick;
use crate::scheduler::schedule::{CRON_ALLOWANCE, ScheduleKind};

/// Longest single sleep while waiting for a wall-clock fire time, so a clock step (NTP,
/// suspend) is noticed within this long.
const MAX_WALL_SLEEP: Duration = Duration::from_secs(60);

impl<S: Clone + Send + Sync + 'static> PreparedJob<S> {
    /// Runs the job's schedule until shutdown.
    pub(crate) async fn run(self, state: S, runtime: Arc<Runtime>, status: Arc<JobState>) {
        // A run of this job left unfinished while no instance watched it (the whole fleet
        // was down): taken over as soon as its lease is gone.
        self.watch(state.clone(), &runtime, &status, Follow::Newest);
        let initial_delay = self.job.schedule.initial_delay;
        let start = Instant::now() + initial_delay;
        if !initial_delay.is_zero() {
            status.set_next_fire(Some(runtime.clock.now() + initial_delay));
            if !sleep_or_shutdown(&runtime, start).await {
                return;
            }
        }
        match self.job.schedule.kind.clone() {
            ScheduleKind::Cron { .. } => self.run_cron(state, &runtime, &status).await,
            ScheduleKind::FixedRate(period) => {
                self.run_fixed_rate(period, start, state, &runtime, &status)
                    .await
            }
            ScheduleKind::FixedDelay(delay) => {
                self.run_fixed_delay(delay, start, state, &runtime, &status)
                    .await
            }
        }
        status.set_next_fire(None);
    }

    fn next_cron_fire(&self, after: DateTime<Utc>, runtime: &Runtime) -> Option<DateTime<Utc>> {
        self.job.schedule.next_cron_fire(after, runtime.zone)
    }

    /// Cron: each fire time is computed in the job's zone from the previous one, so
    /// daylight-saving changes are followed (the offset is never cached).
    async fn run_cron(&self, state: S, runtime: &Arc<Runtime>, status: &Arc<JobState>) {
        let mut after: DateTime<Utc> = runtime.clock.now().into();
        if let Some(due) = self.missed_tick(after, runtime) {
            self.tick(state.clone(), runtime, status, due).await;
        }
        loop {
            let Some(fire) = self.next_cron_fire(after, runtime) else {
                tracing::warn!(job = %self.job.name, "cron schedule has no further fire time");
                return;
            };
            status.set_next_fire(Some(fire.into()));
            let Some(due) = sleep_until_wall(runtime, fire.into()).await else {
                return;
            };
            // A pause may have carried us past later fire times too: only the latest counts.
            let now: DateTime<Utc> = runtime.clock.now().into();
            let mut latest = fire;
            let mut passed_over = 0u32;
            while let Some(next) = self.next_cron_fire(latest, runtime)
                && next <= now
            {
                passed_over += 1;
                latest = next;
            }
            self.report_passed_over(passed_over, fire.into(), status);
            let gap = self
                .next_cron_fire(latest, runtime)
                .and_then(|next| (next - latest).to_std().ok())
                .unwrap_or(Duration::MAX);
            // Late by the monotonic clock (a pause), or by the wall clock the fire times are
            // read on, whichever says more: the monotonic clock stands still while the host
            // is suspended.
            let mapped = due + (latest - fire).to_std().unwrap_or_default();
            let wall_late = (now - latest).to_std().unwrap_or_default();
            let by_wall = Instant::now().checked_sub(wall_late).unwrap_or(mapped);
            let due = Due {
                at: mapped.min(by_wall),
                fire: latest.into(),
                allowance: CRON_ALLOWANCE.min(gap / 2),
                rerun: None,
                catch_up: None,
                claim: Some(cron_tick(latest, gap)),
            };
            self.tick(state.clone(), runtime, status, due).await;
            after = latest;
            let now: DateTime<Utc> = runtime.clock.now().into();
            let mut overlapped = 0u32;
            while let Some(next) = self.next_cron_fire(after, runtime)
                && next <= now
            {
                overlapped += 1;
                after = next;
            }
            self.report_overlap(overlapped, status);
        }
    }

    /// The tick to catch up at start, if the job asks for it: the latest fire time at or
    /// before `now`, if within the job's bound. The tick window (nobody acquired the lock since
    /// that fire time, less the usual allowance) decides whether the fleet ran it.
    fn missed_tick(&self, now: DateTime<Utc>, runtime: &Runtime) -> Option<Due> {
        let within = self.job.schedule.catch_up?;
        let fire = self.job.schedule.latest_fire(now, runtime.zone)?;
        let ago = (now - fire).to_std().ok()?;
        if ago > within {
            return None;
        }
        let gap = self
            .next_cron_fire(fire, runtime)
            .and_then(|next| (next - fire).to_std().ok())
            .unwrap_or(Duration::MAX);
        tracing::info!(
            job = %self.job.name,
            fire = %humantime::format_rfc3339_millis(fire.into()),
            "catching up the latest tick, if no instance ran it"
        );
        // A window, not an instant in the past: the monotonic clock may not reach back that
        // far (a host booted since).
        Some(Due {
            at: Instant::now(),
            fire: fire.into(),
            allowance: Duration::ZERO,
            rerun: None,
            catch_up: Some(ago + CRON_ALLOWANCE.min(gap / 2)),
            claim: Some(cron_tick(fire, gap)),
        })
    }

    /// Fixed rate on a grid `start + k × period`: ticks missed during a long run are skipped
    /// (and logged), and firing continues on the grid afterwards; it never stalls.
    async fn run_fixed_rate(
        &self,
        period: Duration,
        origin: Instant,
        state: S,
        runtime: &Arc<Runtime>,
        status: &Arc<JobState>,
    ) {
        // The grid index of the latest tick due at `now`.
        let index_at = |now: Instant| {
            u32::try_from(now.saturating_duration_since(origin).as_nanos() / period.as_nanos())
                .unwrap_or(u32::MAX)
        };
        // The grid on the wall clock, read once: ticks are named by it (and claimed in the
        // store, at most one per period across the fleet), whatever steps the clock makes.
        let wall_origin = runtime.clock.now() - Instant::now().saturating_duration_since(origin);
        let mut tick_index: u32 = 0;
        loop {
            // Beyond about 4 billion ticks (or a grid past the clock's range) the job ends.
            let grid = |index: u32| {
                period
                    .checked_mul(index)
                    .and_then(|d| origin.checked_add(d))
            };
            let Some(due) = grid(tick_index) else {
                tracing::warn!(job = %self.job.name, "fixed-rate schedule exhausted");
                return;
            };
            status.set_next_fire(Some(
                runtime.clock.now() + due.saturating_duration_since(Instant::now()),
            ));
            if !sleep_or_shutdown(runtime, due).await {
                return;
            }
            let latest = index_at(Instant::now()).max(tick_index);
            let wall_due = runtime.clock.now() - Instant::now().saturating_duration_since(due);
            self.report_passed_over(latest - tick_index, wall_due, status);
            let Some(due) = grid(latest) else { return };
            let fire = period
                .checked_mul(latest)
                .and_then(|d| wall_origin.checked_add(d))
                .unwrap_or(wall_origin);
            let due = Due {
                at: due,
                fire,
                allowance: Duration::ZERO,
                rerun: None,
                catch_up: None,
                claim: Some(Tick::new(fire).with_spacing(period).ahead_at_most(period)),
            };
            self.tick(state.clone(), runtime, status, due).await;
            let next = index_at(Instant::now()).saturating_add(1).max(latest + 1);
            self.report_overlap(next - latest - 1, status);
            tick_index = next;
        }
    }

    async fn run_fixed_delay(
        &self,
        delay: Duration,
        first: Instant,
        state: S,
        runtime: &Arc<Runtime>,
        status: &Arc<JobState>,
    ) {
        let mut due = first;
        loop {
            status.set_next_fire(None);
            let at = Due {
                at: due,
                fire: runtime.clock.now() - Instant::now().saturating_duration_since(due),
                allowance: Duration::ZERO,
                rerun: None,
                catch_up: None,
                claim: None,
            };
            self.tick(state.clone(), runtime, status, at).await;
            status.set_next_fire(Some(runtime.clock.now() + delay));
            due = Instant::now() + delay;
            if !sleep_or_shutdown(runtime, due).await {
                return;
            }
        }
    }

    fn report_overlap(&self, missed: u32, status: &JobState) {
        if missed > 0 {
            tracing::warn!(
                job = %self.job.name,
                missed,
                "skipped ticks: the previous run of this job was still going"
            );
            status.record_overlap(missed);
        }
    }

    /// Fire times a pause carried the scheduler past, from `first` on: missed, not replayed.
    fn report_passed_over(&self, missed: u32, first: SystemTime, status: &JobState) {
        if missed > 0 {
            tracing::warn!(
                job = %self.job.name,
                missed,
                first_fire = %humantime::format_rfc3339_millis(first),
                "missed ticks: this process did not run at their fire times (paused?); only the \
                 latest is considered"
            );
            status.record_missed(missed);
        }
    }
}

/// The claim of cron fire time `fire`, the next one `gap` later: granted once (every instance
/// names it the same), to an instance whose clock runs at most `gap` ahead of the store's.
fn cron_tick(fire: DateTime<Utc>, gap: Duration) -> Tick {
    Tick::new(fire.into()).ahead_at_most(gap)
}

/// Sleeps until `deadline`; false if shutdown came first, or at the same time.
pub(super) async fn sleep_or_shutdown(runtime: &Runtime, deadline: Instant) -> bool {
    tokio::select! {
        biased;
        () = runtime.shutdown.cancelled() => false,
        () = tokio::time::sleep_until(deadline) => true,
    }
}

/// Sleeps until the wall clock shows `fire`, in bounded steps so clock steps are noticed.
/// Returns the instant, on the monotonic clock, at which `fire` was due (from the last reading
/// before it, so a pause during the sleep shows as lateness); `None` if shutdown came first.
async fn sleep_until_wall(runtime: &Runtime, fire: SystemTime) -> Option<Instant> {
    let mut due = None;
    loop {
        let (wall, now) = (runtime.clock.now(), Instant::now());
        let remaining = match fire.duration_since(wall) {
            Ok(remaining) if !remaining.is_zero() => remaining,
            passed => {
                if runtime.shutdown.is_cancelled() {
                    return None;
                }
                let passed = passed.err().map(|e| e.duration()).unwrap_or_default();
                return Some(due.unwrap_or_else(|| now.checked_sub(passed).unwrap_or(now)));
            }
        };
        due = Some(now + remaining);
        if !sleep_or_shutdown(runtime, now + remaining.min(MAX_WALL_SLEEP)).await {
            return None;
        }
    }
}
