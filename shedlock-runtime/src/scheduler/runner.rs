//! One timer for all of a scheduler's jobs: it waits for the earliest fire time, then starts
//! each tick due as a task of its own; a job waits for none but its tick in flight, so 100,000
//! idle jobs cost their schedules and a heap entry each, not a task each.
//!
//! Runs never overlap within an instance: a job is put back on the timer only once its tick
//! ended, and fire times that passed while it ran are skipped and logged. After a pause (the
//! process stopped, the host overloaded) only the latest fire time that has passed is
//! considered; the earlier ones are counted as missed.
//!
//! Jobs added, replaced and removed at runtime come as commands, in the order they were made
//! ([`Roster`]). A job's slot carries an epoch, bumped at each change: heap entries of an
//! earlier definition are left in the heaps and skipped when they come up (no search), and a
//! slot is reused only once its job's tick in flight ended.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::control::RemoveMode;
use super::recovery::Follow;
use super::roster::{Command, Placed, Roster};
use super::runtime::{Due, PreparedJob, Runtime};
use super::status::{JobState, JobStatus};
use super::timing::{Plan, grid, grid_index, next_on_grid};
use crate::Tick;
use crate::scheduler::schedule::{CRON_ALLOWANCE, ScheduleKind, cron_tick};

/// Longest single sleep while waiting for a wall-clock fire time, so a clock step (NTP,
/// suspend) is noticed within this long.
const MAX_WALL_SLEEP: Duration = Duration::from_secs(60);

/// Changes taken in one round: a burst of them (10,000 tenants added at once) is taken in
/// rounds, with the ticks due fired between them.
const CHANGES_PER_ROUND: usize = 256;

/// Every job of one scheduler, on one timer.
pub(crate) struct Timer<S> {
    roster: Arc<Roster<S>>,
    runtime: Arc<Runtime>,
    /// By slot.
    cells: Vec<Cell<S>>,
    queues: Queues,
    /// Where tick tasks report their end.
    ended: mpsc::UnboundedSender<(u32, bool)>,
}

/// A slot of the timer, and its epoch: bumped at every change of the job in it (added,
/// replaced, removed), so queue entries made before are known stale.
struct Cell<S> {
    epoch: u32,
    job: Option<Slot<S>>,
}

impl<S> Default for Cell<S> {
    fn default() -> Self {
        Cell {
            epoch: 0,
            job: None,
        }
    }
}

/// A job on the timer.
struct Slot<S> {
    job: Arc<PreparedJob<S>>,
    status: Arc<JobState>,
    plan: Plan,
    /// The tick in flight, if any (fired, until its task ended): cancelled to drop it.
    running: Option<CancellationToken>,
    /// Removals waiting for the tick in flight to end (the job is being removed when any).
    removals: Vec<oneshot::Sender<JobStatus>>,
}

/// A tick fired: the job's slot, when it was due, and whether the fire times that pass
/// while it runs are skipped afterwards.
type Fired = (u32, Due, bool);

/// A tick task's end, reported to the timer (also when the task panicked or was aborted).
struct Ended {
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

/// The timer's queues: monotonic deadlines (starts, fixed rate and delay) and wall-clock fire
/// times (cron), earliest first, by slot and epoch.
#[derive(Default)]
struct Queues {
    mono: BinaryHeap<Reverse<(Instant, u32, u32)>>,
    wall: BinaryHeap<Reverse<(SystemTime, u32, u32)>>,
}

impl<S: Clone + Send + Sync + 'static> Timer<S> {
    pub(crate) fn new(roster: Arc<Roster<S>>) -> (Self, mpsc::UnboundedReceiver<(u32, bool)>) {
        let (ended, receiver) = mpsc::unbounded_channel();
        let timer = Timer {
            runtime: Arc::clone(&roster.runtime),
            roster,
            cells: Vec::new(),
            queues: Queues::default(),
            ended,
        };
        (timer, receiver)
    }

    /// Runs the schedules of `jobs` and of the jobs `changes` add, until shutdown.
    pub(crate) async fn run(
        mut self,
        mut ended: mpsc::UnboundedReceiver<(u32, bool)>,
        jobs: Vec<Placed<S>>,
        mut changes: mpsc::UnboundedReceiver<Command<S>>,
    ) {
        let start = Instant::now();
        self.cells.reserve(jobs.len());
        for (slot, job, status) in jobs {
            self.place(slot, job, status, start);
        }
        let runtime = Arc::clone(&self.runtime);
        loop {
            // The last reading before a fire time passes: a pause during the sleep shows as
            // lateness.
            let (wall_before, before) = (runtime.clock.now(), Instant::now());
            let wake = self.queues.wake(wall_before, before);
            tokio::select! {
                biased;
                () = runtime.shutdown.cancelled() => break,
                Some((slot, skip_passed)) = ended.recv() => self.tick_ended(slot, skip_passed),
                Some(command) = changes.recv() => {
                    self.apply(command);
                    for _ in 1..CHANGES_PER_ROUND {
                        match changes.try_recv() {
                            Ok(command) => self.apply(command),
                            Err(_) => break,
                        }
                    }
                }
                () = sleep_until(wake) => {}
            }
            if runtime.shutdown.is_cancelled() {
                break;
            }
            let fired = self.fire_due(wall_before, before);
            self.launch(fired);
        }
        for cell in &self.cells {
            if let Some(slot) = &cell.job {
                slot.status.set_next_fire(None);
            }
        }
    }

    /// Every tick due now, taken off the queues (entries of an earlier epoch skipped).
    fn fire_due(&mut self, wall_before: SystemTime, before: Instant) -> Vec<Fired> {
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

    /// Whether a queue entry of `slot` made at `epoch` is still the job's.
    fn current(&self, slot: u32, epoch: u32) -> bool {
        self.cells
            .get(slot as usize)
            .is_some_and(|cell| cell.epoch == epoch && cell.job.is_some())
    }

    fn slot(&mut self, slot: u32) -> Option<&mut Slot<S>> {
        self.cells.get_mut(slot as usize)?.job.as_mut()
    }

    /// Puts a job into `slot` and on the timer: its start (after its initial delay from `at`),
    /// and a watch of its latest run if that was left unfinished while no instance watched it
    /// (the whole fleet was down): taken over as soon as its lease is gone.
    fn place(&mut self, slot: u32, job: Arc<PreparedJob<S>>, status: Arc<JobState>, at: Instant) {
        let index = slot as usize;
        if self.cells.len() <= index {
            self.cells.resize_with(index + 1, Cell::default);
        }
        job.watch(
            self.roster.state.clone(),
            &self.runtime,
            &status,
            Follow::Newest,
        );
        let cell = &mut self.cells[index];
        cell.epoch = cell.epoch.wrapping_add(1);
        cell.job = Some(Slot {
            job,
            status,
            plan: Plan::Start,
            running: None,
            removals: Vec::new(),
        });
        self.arm(slot, at);
    }

    /// A change from the roster.
    fn apply(&mut self, command: Command<S>) {
        match command {
            Command::Add {
                slot,
                job,
                status,
                done,
            } => {
                self.place(slot, job, status, Instant::now());
                let _ = done.send(());
            }
            Command::Replace { slot, job, done } => {
                let (now, wall_now) = (Instant::now(), self.runtime.clock.now());
                let cell = &mut self.cells[slot as usize];
                if let Some(current) = cell.job.as_mut() {
                    let running = current.running.is_some();
                    current.plan = current
                        .plan
                        .replaced(&job.job.schedule, running, now, wall_now);
                    current.job = job;
                    cell.epoch = cell.epoch.wrapping_add(1);
                    // A tick in flight: the new definition goes on the timer when it ends.
                    if !running {
                        self.arm(slot, now);
                    }
                }
                let _ = done.send(());
            }
            Command::Remove { slot, mode, done } => {
                let cell = &mut self.cells[slot as usize];
                cell.epoch = cell.epoch.wrapping_add(1);
                let Some(removed) = cell.job.as_mut() else {
                    return;
                };
                removed.job.watch.retire();
                removed.status.set_next_fire(None);
                removed.removals.push(done);
                match &removed.running {
                    Some(cancel) if mode == RemoveMode::Cancel => cancel.cancel(),
                    Some(_) => {}
                    None => self.forget(slot),
                }
            }
        }
    }

    /// A removed job is gone: its name and slot are free, its removers told.
    fn forget(&mut self, slot: u32) {
        let cell = &mut self.cells[slot as usize];
        cell.epoch = cell.epoch.wrapping_add(1);
        let Some(gone) = cell.job.take() else {
            return;
        };
        self.roster.forget(&gone.job.job.name);
        let status = gone.status.snapshot(&*gone.job);
        for done in gone.removals {
            let _ = done.send(status.clone());
        }
    }

    /// Puts a job's next fire time on the timer as its plan says, from `now`.
    fn arm(&mut self, slot: u32, now: Instant) {
        let wall_now = self.runtime.clock.now();
        let epoch = self.cells[slot as usize].epoch;
        let Some(armed) = self.cells[slot as usize].job.as_mut() else {
            return;
        };
        match &mut armed.plan {
            Plan::Start => {
                let delay = armed.job.job.schedule.initial_delay;
                if !delay.is_zero() {
                    armed.status.set_next_fire(Some(wall_now + delay));
                }
                self.queues.mono.push(Reverse((now + delay, slot, epoch)));
            }
            Plan::Cron { after } => {
                let after = *after;
                self.schedule_cron(slot, after);
            }
            Plan::Rate {
                period,
                origin,
                index,
                ..
            } => {
                let next = next_on_grid(*origin, *period, *index, now);
                *index = next;
                // Beyond about 4 billion ticks (or a grid past the clock's range) the job ends.
                match grid(*origin, *period, next) {
                    Some(due) => {
                        armed.status.set_next_fire(Some(
                            wall_now + due.saturating_duration_since(now),
                        ));
                        self.queues.mono.push(Reverse((due, slot, epoch)));
                    }
                    None => {
                        tracing::warn!(job = %armed.job.job.name, "fixed-rate schedule exhausted");
                        armed.status.set_next_fire(None);
                        armed.plan = Plan::Done;
                    }
                }
            }
            Plan::Delay(delay) => {
                armed.status.set_next_fire(Some(wall_now + *delay));
                self.queues.mono.push(Reverse((now + *delay, slot, epoch)));
            }
            Plan::Done => armed.status.set_next_fire(None),
        }
    }

    /// A job's tick ended: the job is gone if it was being removed, else its next fire time
    /// goes on the timer (of its new definition, if it was replaced meanwhile).
    fn tick_ended(&mut self, slot: u32, skip_passed: bool) {
        let runtime = Arc::clone(&self.runtime);
        let Some(ended) = self.slot(slot) else {
            return;
        };
        ended.running = None;
        if !ended.removals.is_empty() {
            return self.forget(slot);
        }
        let (prepared, status) = (&ended.job, &ended.status);
        match &mut ended.plan {
            Plan::Cron { after } if skip_passed => {
                let now: DateTime<Utc> = runtime.clock.now().into();
                let mut overlapped = 0u32;
                while let Some(next) = prepared.next_cron_fire(*after, &runtime)
                    && next <= now
                {
                    overlapped += 1;
                    *after = next;
                }
                prepared.report_overlap(overlapped, status);
            }
            Plan::Rate {
                period,
                origin,
                index,
                ..
            } => {
                let next = next_on_grid(*origin, *period, *index, Instant::now());
                prepared.report_overlap(next - *index - 1, status);
            }
            _ => {}
        }
        self.arm(slot, Instant::now());
    }

    /// A monotonic deadline passed: a job's start, or its next fixed-rate or fixed-delay tick.
    fn fire_mono(&mut self, slot: u32, at: Instant, fired: &mut Vec<Fired>) {
        let runtime = Arc::clone(&self.runtime);
        let Some(current) = self.slot(slot) else {
            return;
        };
        match &current.plan {
            Plan::Start => match current.job.job.schedule.kind.clone() {
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
            allowance: CRON_ALLOWANCE.min(gap / 2),
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
    fn launch(&mut self, fired: Vec<Fired>) {
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

    /// Puts a cron job's first fire time after `after` on the timer.
    fn schedule_cron(&mut self, slot: u32, after: DateTime<Utc>) {
        let runtime = Arc::clone(&self.runtime);
        let epoch = self.cells[slot as usize].epoch;
        let Some(current) = self.slot(slot) else {
            return;
        };
        match current.job.next_cron_fire(after, &runtime) {
            Some(fire) => {
                current.status.set_next_fire(Some(fire.into()));
                self.queues.wall.push(Reverse((fire.into(), slot, epoch)));
            }
            None => {
                tracing::warn!(job = %current.job.job.name, "cron schedule has no further fire time");
                current.status.set_next_fire(None);
                current.plan = Plan::Done;
            }
        }
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
                due,
                ended,
                cancel,
            } = self;
            let _ended = ended;
            job.tick(state, &task_runtime, &status, due, &cancel).await;
        });
    }
}

impl Queues {
    /// When to wake next, from a reading of both clocks: the earliest monotonic deadline, or
    /// the earliest wall-clock fire time as far as the monotonic clock can tell (at most
    /// [`MAX_WALL_SLEEP`] ahead, to notice clock steps). `None`: nothing queued.
    fn wake(&self, wall_now: SystemTime, now: Instant) -> Option<Instant> {
        let mono = self.mono.peek().map(|&Reverse((at, _, _))| at);
        let wall =
            self.wall
                .peek()
                .map(|&Reverse((fire, _, _))| match fire.duration_since(wall_now) {
                    Ok(remaining) => now + remaining.min(MAX_WALL_SLEEP),
                    Err(_) => now,
                });
        match (mono, wall) {
            (Some(mono), Some(wall)) => Some(mono.min(wall)),
            (one, other) => one.or(other),
        }
    }
}

/// Sleeps until `deadline`, or forever without one.
async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

impl<S: Clone + Send + Sync + 'static> PreparedJob<S> {
    fn next_cron_fire(&self, after: DateTime<Utc>, runtime: &Runtime) -> Option<DateTime<Utc>> {
        self.job.schedule.next_cron_fire(after, runtime.zone)
    }

    /// The tick to catch up at start, if the job asks for it: the latest fire time at or
    /// before `now`, if within the job's bound. The store's tick claim (and the tick window:
    /// nobody acquired the lock since that fire time, less the usual allowance) decides
    /// whether the fleet ran it.
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
            claimed: None,
        })
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
