//! Firing: the ticks due taken off the timer's queues, each job's plan moved on, and the
//! ticks started as tasks, the locks of those due at one instant claimed in one batch.

use std::cmp::Reverse;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{Plan, Slot, Timer};
use crate::Tick;
use crate::scheduler::runtime::{Due, PreparedJob, Runtime};
use crate::scheduler::schedule::{CRON_ALLOWANCE, ScheduleKind, cron_tick};
use crate::scheduler::status::{JobOutcome, JobState};
use crate::scheduler::timing::{grid, grid_index};

/// A tick fired: the job's slot, when it was due, and whether the fire times that pass
/// while it runs are skipped afterwards.
pub(super) type Fired = (u32, Due, bool);

/// A tick task's end, reported to the timer (also when the task panicked or was aborted).
pub(super) struct Ended {
    slot: u32,
    tx: mpsc::UnboundedSender<(u32, bool)>,
    /// Skip the fire times that passed while the tick ran (not after a catch-up at start).
    skip_passed: bool,
}

impl Drop for Ended {
    fn drop(&mut self) {
        let _ = self.tx.send((self.slot, self.skip_passed));
    }
}

impl<S: Clone + Send + Sync + 'static> Timer<S> {
    /// Every tick due now, taken off the queues (entries of an earlier epoch skipped).
    pub(super) fn fire_due(&mut self, wall_before: SystemTime, before: Instant) -> Vec<Fired> {
        let (wall_now, now) = (self.runtime.clock.now(), Instant::now());
        let mut fired = Vec::new();
        while let Some(&Reverse((at, slot, epoch))) = self.queues.mono.peek()
            && at <= now
        {
            self.queues.mono.pop();
            if self.current(slot, epoch) {
                self.fire_mono(slot, at, &mut fired);
            }
        }
        while let Some(&Reverse((fire, slot, epoch))) = self.queues.wall.peek()
            && fire <= wall_now
        {
            self.queues.wall.pop();
            if !self.current(slot, epoch) {
                continue;
            }
            let due = match fire.duration_since(wall_before) {
                Ok(after_reading) => before + after_reading,
                Err(_) => now
                    .checked_sub(wall_now.duration_since(fire).unwrap_or_default())
                    .unwrap_or(now),
            };
            self.fire_cron(slot, fire.into(), due, &mut fired);
        }
        fired
    }

    /// A monotonic deadline passed: a job's start, or its next fixed-rate or fixed-delay tick.
    fn fire_mono(&mut self, slot: u32, at: Instant, fired: &mut Vec<Fired>) {
        let runtime = Arc::clone(&self.runtime);
        let Some(current) = self.slot(slot) else {
            return;
        };
        match &current.plan {
            Plan::Start => match current.job.schedule.kind.clone() {
                ScheduleKind::Cron { .. } => {
                    let after: DateTime<Utc> = runtime.clock.now().into();
                    current.plan = Plan::Cron { after };
                    match current.job.missed_tick(after, &runtime) {
                        Some(due) => fired.push((slot, due, false)),
                        None => self.schedule_cron(slot, after),
                    }
                }
                ScheduleKind::FixedRate(period) => {
                    let wall_origin =
                        runtime.clock.now() - Instant::now().saturating_duration_since(at);
                    current.plan = Plan::Rate {
                        period,
                        origin: at,
                        wall_origin,
                        index: 0,
                    };
                    Self::fire_rate(slot, current, &runtime, fired);
                }
                ScheduleKind::FixedDelay(delay) => {
                    current.plan = Plan::Delay(delay);
                    Self::fire_delay(slot, current, at, &runtime, fired);
                }
            },
            Plan::Rate { .. } => Self::fire_rate(slot, current, &runtime, fired),
            Plan::Delay(_) => Self::fire_delay(slot, current, at, &runtime, fired),
            Plan::Cron { .. } | Plan::Done => {}
        }
    }

    /// The cron fire time `fire` has come (due at `due` on the monotonic clock).
    fn fire_cron(&mut self, slot: u32, fire: DateTime<Utc>, due: Instant, fired: &mut Vec<Fired>) {
        let runtime = Arc::clone(&self.runtime);
        let Some(current) = self.slot(slot) else {
            return;
        };
        let (prepared, status) = (&current.job, &current.status);
        // A pause may have carried us past later fire times too: only the latest counts.
        let now: DateTime<Utc> = runtime.clock.now().into();
        let mut latest = fire;
        let mut passed_over = 0u32;
        while let Some(next) = prepared.next_cron_fire(latest, &runtime)
            && next <= now
        {
            passed_over += 1;
            latest = next;
        }
        prepared.report_passed_over(passed_over, fire.into(), status);
        let gap = prepared
            .next_cron_fire(latest, &runtime)
            .and_then(|next| (next - latest).to_std().ok())
            .unwrap_or(Duration::MAX);
        // Late by the monotonic clock (a pause), or by the wall clock the fire times are read
        // on, whichever says more: the monotonic clock stands still while the host is
        // suspended.
        let mapped = due + (latest - fire).to_std().unwrap_or_default();
        let wall_late = (now - latest).to_std().unwrap_or_default();
        let by_wall = Instant::now().checked_sub(wall_late).unwrap_or(mapped);
        let due = Due {
            at: mapped.min(by_wall),
            fire: latest.into(),
            allowance: status.allowance(mapped.min(by_wall), CRON_ALLOWANCE.min(gap / 2)),
            rerun: None,
            catch_up: None,
            claim: Some(cron_tick(latest, gap)),
            claimed: None,
        };
        current.plan = Plan::Cron { after: latest };
        fired.push((slot, due, true));
    }

    /// The fixed-rate grid's latest tick due now: ticks a pause passed over are counted as
    /// missed, and firing continues on the grid; it never stalls.
    fn fire_rate(slot: u32, current: &mut Slot<S>, runtime: &Runtime, fired: &mut Vec<Fired>) {
        let Plan::Rate {
            period,
            origin,
            wall_origin,
            index,
        } = &mut current.plan
        else {
            return;
        };
        let now = Instant::now();
        let latest = grid_index(*origin, *period, now).max(*index);
        let Some(due) = grid(*origin, *period, *index) else {
            return;
        };
        let wall_due = runtime.clock.now() - now.saturating_duration_since(due);
        current
            .job
            .report_passed_over(latest - *index, wall_due, &current.status);
        let Some(due) = grid(*origin, *period, latest) else {
            return;
        };
        let fire = period
            .checked_mul(latest)
            .and_then(|d| wall_origin.checked_add(d))
            .unwrap_or(*wall_origin);
        *index = latest;
        let due = Due {
            at: due,
            fire,
            allowance: Duration::ZERO,
            rerun: None,
            catch_up: None,
            claim: Some(Tick::new(fire).with_spacing(*period).ahead_at_most(*period)),
            claimed: None,
        };
        fired.push((slot, due, true));
    }

    /// A fixed-delay tick due at `at`.
    fn fire_delay(
        slot: u32,
        current: &Slot<S>,
        at: Instant,
        runtime: &Runtime,
        fired: &mut Vec<Fired>,
    ) {
        current.status.set_next_fire(None);
        let due = Due {
            at,
            fire: runtime.clock.now() - Instant::now().saturating_duration_since(at),
            allowance: Duration::ZERO,
            rerun: None,
            catch_up: None,
            claim: None,
            claimed: None,
        };
        fired.push((slot, due, true));
    }

    /// Starts the ticks fired at one instant, each as a task of its own (the timer hears of
    /// its end). The locks of those that have one are claimed together first, in one call to
    /// the provider: one round trip where the store batches.
    pub(super) fn launch(&mut self, fired: Vec<Fired>) {
        if fired.is_empty() {
            return;
        }
        let alone = fired.len() == 1;
        let mut claims = Vec::new();
        // A batch names each lock once: a second job on the same lock asks for it itself.
        let mut names = HashSet::new();
        for (slot, due, skip_passed) in fired {
            let ended = Ended {
                slot,
                tx: self.ended.clone(),
                skip_passed,
            };
            let Some(current) = self.slot(slot) else {
                continue;
            };
            let cancel = CancellationToken::new();
            current.running = Some(cancel.clone());
            let tick = FiredTick {
                job: Arc::clone(&current.job),
                status: Arc::clone(&current.status),
                due,
                ended,
                cancel,
            };
            match (&tick.job.lock, &self.runtime.executor) {
                // Alone at its instant: the tick makes its checks and asks for its lock itself.
                (Some(lock), Some(_))
                    if !alone
                        && tick.due.rerun.is_none()
                        && names.insert(lock.config.shared_name()) =>
                {
                    // A tick that may not start ends here (`ended` reports it).
                    if tick.job.may_fire(&self.runtime, &tick.status, &tick.due) {
                        claims.push(tick);
                    }
                }
                _ => tick.spawn(&self.roster.state, &self.runtime),
            }
        }
        let Some(executor) = self.runtime.executor.clone() else {
            return;
        };
        if claims.len() < 2 {
            // Alone at its instant: the tick asks for its lock itself.
            for tick in claims {
                tick.spawn(&self.roster.state, &self.runtime);
            }
            return;
        }
        let mut configs = Vec::with_capacity(claims.len());
        let mut heartbeats = Vec::with_capacity(claims.len());
        for tick in &mut claims {
            let launch = PreparedJob::<S>::tick_launch(&mut tick.due);
            if let Some((config, _, renew_until)) =
                tick.job.lock.as_ref().map(|lock| lock.config_for(&launch))
            {
                configs.push(config);
                heartbeats.push(renew_until);
            }
        }
        let (state, runtime) = (self.roster.state.clone(), Arc::clone(&self.runtime));
        self.runtime.tasks.spawn(async move {
            let answers = executor.claim_many(&configs).await;
            for (mut tick, (claimed, renew_until)) in
                claims.into_iter().zip(answers.into_iter().zip(heartbeats))
            {
                tick.due.claimed = Some((claimed, renew_until));
                tick.spawn(&state, &runtime);
            }
        });
    }
}

/// A tick fired, about to start as a task of its own.
struct FiredTick<S> {
    job: Arc<PreparedJob<S>>,
    status: Arc<JobState>,
    due: Due,
    /// Tells the timer when the task is over.
    ended: Ended,
    /// Cancelled when the job is removed with `RemoveMode::Cancel`.
    cancel: CancellationToken,
}

impl<S: Clone + Send + Sync + 'static> FiredTick<S> {
    fn spawn(self, state: &S, runtime: &Arc<Runtime>) {
        let (state, task_runtime) = (state.clone(), Arc::clone(runtime));
        runtime.tasks.spawn(async move {
            let FiredTick {
                job,
                status,
                mut due,
                ended,
                cancel,
            } = self;
            let _ended = ended;
            if job
                .claim_on_time(&task_runtime, &status, &mut due, &cancel)
                .await
            {
                job.tick(state, &task_runtime, &status, due, &cancel).await;
            }
        });
    }
}

/// When the job of a tick due `due` is due next, on the monotonic clock: a cron or fixed-rate
/// tick claims its fire time allowing it at most the gap to the next fire time ahead of the
/// store's clock (`cron_tick`, `fire_rate`), and that gap is the one wanted here. `None` for a
/// fixed-delay tick (its next one is timed from its end), a catch-up (run late on purpose) and
/// a rerun.
fn next_due(due: &Due) -> Option<Instant> {
    if due.catch_up.is_some() || due.rerun.is_some() {
        return None;
    }
    let gap = u64::try_from(due.claim?.ahead_millis()).ok()?;
    due.at.checked_add(Duration::from_millis(gap))
}

impl<S: Clone + Send + Sync + 'static> PreparedJob<S> {
    /// The lock of a locked tick: claimed here unless it was with the other ticks of its
    /// instant (this tick's checks made first, as `tick` would), then kept only if the store
    /// answered before the job's next fire time. A grant that comes later (a claim that waited
    /// out a silent network partition in its socket) is stale: another tick is due already,
    /// and a run started now would hold the lock against it. It is given back at once (no
    /// `lock_at_least_for`: nothing ran) and the tick is recorded as missed. Whether the tick
    /// goes on to `tick`.
    async fn claim_on_time(
        &self,
        runtime: &Runtime,
        status: &JobState,
        due: &mut Due,
        cancel: &CancellationToken,
    ) -> bool {
        let (Some(lock), Some(executor)) = (&self.lock, &runtime.executor) else {
            return true;
        };
        if due.rerun.is_some() {
            return true;
        }
        if due.claimed.is_none() {
            if cancel.is_cancelled() || !self.may_fire(runtime, status, due) {
                return false;
            }
            let launch = Self::tick_launch(due);
            let (config, _, renew_until) = lock.config_for(&launch);
            due.claimed = Some((executor.claim(&config).await, renew_until));
        }
        let (Some(next), Some((Ok(Some((lease, requested_at))), _))) =
            (next_due(due), &due.claimed)
        else {
            return true;
        };
        let now = Instant::now();
        if now < next {
            return true;
        }
        let late = now.saturating_duration_since(due.at);
        tracing::warn!(
            job = %self.name,
            fire = %humantime::format_rfc3339_millis(due.fire),
            late = %humantime::format_duration(Duration::from_millis(
                u64::try_from(late.as_millis()).unwrap_or(u64::MAX)
            )),
            "tick missed: its lock was granted after the job's next fire time; given back unused"
        );
        executor.give_back(lease, *requested_at).await;
        status.gave_back(Instant::now());
        status.record(&self.name, JobOutcome::Missed { late });
        false
    }
}

impl<S: Clone + Send + Sync + 'static> PreparedJob<S> {
    pub(super) fn next_cron_fire(
        &self,
        after: DateTime<Utc>,
        runtime: &Runtime,
    ) -> Option<DateTime<Utc>> {
        self.schedule.next_cron_fire(after, runtime.zone)
    }

    /// The tick to catch up at start, if the job asks for it: the latest fire time at or
    /// before `now`, if within the job's bound. The store's tick claim (and the tick window:
    /// nobody acquired the lock since that fire time, less the usual allowance) decides
    /// whether the fleet ran it.
    fn missed_tick(&self, now: DateTime<Utc>, runtime: &Runtime) -> Option<Due> {
        let within = self.schedule.catch_up?;
        let fire = self.schedule.latest_fire(now, runtime.zone)?;
        let ago = (now - fire).to_std().ok()?;
        if ago > within {
            return None;
        }
        let gap = self
            .next_cron_fire(fire, runtime)
            .and_then(|next| (next - fire).to_std().ok())
            .unwrap_or(Duration::MAX);
        tracing::info!(
            job = %self.name,
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
            claimed: None,
        })
    }

    pub(super) fn report_overlap(&self, missed: u32, status: &JobState) {
        if missed > 0 {
            tracing::warn!(
                job = %self.name,
                missed,
                "skipped ticks: the previous run of this job was still going"
            );
            status.record_overlap(&self.name, missed);
        }
    }

    /// Fire times a pause carried the scheduler past, from `first` on: missed, not replayed.
    fn report_passed_over(&self, missed: u32, first: SystemTime, status: &JobState) {
        if missed > 0 {
            tracing::warn!(
                job = %self.name,
                missed,
                first_fire = %humantime::format_rfc3339_millis(first),
                "missed ticks: this process did not run at their fire times (paused?); only the \
                 latest is considered"
            );
            status.record_missed(&self.name, missed);
        }
    }
}
