//! One timer for all of a scheduler's jobs: it waits for the earliest fire time, then starts
//! each tick due as a task of its own; a job waits for none but its tick in flight, so 100,000
//! idle jobs cost their schedules and a heap entry each, not a task each.
//!
//! Runs never overlap within an instance: a job is put back on the timer only once its tick
//! ended, and fire times that passed while it ran are skipped and logged. After a pause (the
//! process stopped, the host overloaded) only the latest fire time that has passed is
//! considered; the earlier ones are counted as missed.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashSet};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::recovery::Follow;
use super::runtime::{Due, PreparedJob, Runtime};
use super::status::JobState;
use crate::Tick;
use crate::scheduler::schedule::{CRON_ALLOWANCE, ScheduleKind, cron_tick};

/// Longest single sleep while waiting for a wall-clock fire time, so a clock step (NTP,
/// suspend) is noticed within this long.
const MAX_WALL_SLEEP: Duration = Duration::from_secs(60);

/// Every job of one scheduler, on one timer.
pub(crate) struct Timer<S> {
    jobs: Arc<[Arc<PreparedJob<S>>]>,
    statuses: Arc<[Arc<JobState>]>,
    state: S,
    runtime: Arc<Runtime>,
}

/// Where a job is in its schedule.
enum Plan {
    /// Before its first tick: the initial delay runs.
    Start,
    /// Cron: the latest fire time handled; the next is computed from it in the job's zone, so
    /// daylight-saving changes are followed (the offset is never cached).
    Cron { after: DateTime<Utc> },
    /// Fixed rate on a grid `origin + k × period`, named on the wall clock from `wall_origin`.
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

/// A tick fired: the job's index, when it was due, and whether the fire times that pass
/// while it runs are skipped afterwards.
type Fired = (u32, Due, bool);

/// A tick task's end, reported to the timer (also when the task panicked or was aborted).
struct Ended {
    job: u32,
    tx: mpsc::UnboundedSender<(u32, bool)>,
    /// Skip the fire times that passed while the tick ran (not after a catch-up at start).
    skip_passed: bool,
}

impl Drop for Ended {
    fn drop(&mut self) {
        let _ = self.tx.send((self.job, self.skip_passed));
    }
}

/// The timer's queues: monotonic deadlines (starts, fixed rate and delay) and wall-clock fire
/// times (cron), earliest first, by job index.
#[derive(Default)]
struct Queues {
    mono: BinaryHeap<Reverse<(Instant, u32)>>,
    wall: BinaryHeap<Reverse<(SystemTime, u32)>>,
}

impl<S: Clone + Send + Sync + 'static> Timer<S> {
    pub(crate) fn new(
        jobs: Arc<[Arc<PreparedJob<S>>]>,
        statuses: Vec<Arc<JobState>>,
        state: S,
        runtime: Arc<Runtime>,
    ) -> Self {
        Timer {
            jobs,
            statuses: statuses.into(),
            state,
            runtime,
        }
    }

    /// Runs every job's schedule until shutdown.
    pub(crate) async fn run(self) {
        let mut plans: Vec<Plan> = self.jobs.iter().map(|_| Plan::Start).collect();
        let mut queues = Queues::default();
        let (tx, mut ended) = mpsc::unbounded_channel();
        let start = Instant::now();
        for (index, job) in self.jobs.iter().enumerate() {
            // A run of this job left unfinished while no instance watched it (the whole fleet
            // was down): taken over as soon as its lease is gone.
            job.watch(
                self.state.clone(),
                &self.runtime,
                &self.statuses[index],
                Follow::Newest,
            );
            let delay = job.job.schedule.initial_delay;
            if !delay.is_zero() {
                self.statuses[index].set_next_fire(Some(self.runtime.clock.now() + delay));
            }
            queues.mono.push(Reverse((start + delay, job_index(index))));
        }
        loop {
            // The last reading before a fire time passes: a pause during the sleep shows as
            // lateness.
            let (wall_before, before) = (self.runtime.clock.now(), Instant::now());
            let wake = queues.wake(wall_before, before);
            tokio::select! {
                biased;
                () = self.runtime.shutdown.cancelled() => break,
                Some((job, skip_passed)) = ended.recv() => {
                    self.reschedule(job, skip_passed, &mut plans, &mut queues);
                    continue;
                }
                () = sleep_until(wake) => {}
            }
            if self.runtime.shutdown.is_cancelled() {
                break;
            }
            let (wall_now, now) = (self.runtime.clock.now(), Instant::now());
            let mut fired = Vec::new();
            while let Some(&Reverse((at, job))) = queues.mono.peek()
                && at <= now
            {
                queues.mono.pop();
                self.fire_mono(job, at, &mut plans, &mut queues, &mut fired);
            }
            while let Some(&Reverse((fire, job))) = queues.wall.peek()
                && fire <= wall_now
            {
                queues.wall.pop();
                let due = match fire.duration_since(wall_before) {
                    Ok(after_reading) => before + after_reading,
                    Err(_) => now
                        .checked_sub(wall_now.duration_since(fire).unwrap_or_default())
                        .unwrap_or(now),
                };
                self.fire_cron(job, fire.into(), due, &mut plans, &mut fired);
            }
            self.launch(fired, &tx);
        }
        for status in self.statuses.iter() {
            status.set_next_fire(None);
        }
    }

    /// A monotonic deadline passed: a job's start, or its next fixed-rate or fixed-delay tick.
    fn fire_mono(
        &self,
        job: u32,
        at: Instant,
        plans: &mut [Plan],
        queues: &mut Queues,
        fired: &mut Vec<Fired>,
    ) {
        let index = job as usize;
        let prepared = &self.jobs[index];
        match &plans[index] {
            Plan::Start => match prepared.job.schedule.kind.clone() {
                ScheduleKind::Cron { .. } => {
                    let after: DateTime<Utc> = self.runtime.clock.now().into();
                    plans[index] = Plan::Cron { after };
                    match prepared.missed_tick(after, &self.runtime) {
                        Some(due) => fired.push((job, due, false)),
                        None => self.schedule_cron(job, after, plans, queues),
                    }
                }
                ScheduleKind::FixedRate(period) => {
                    let wall_origin =
                        self.runtime.clock.now() - Instant::now().saturating_duration_since(at);
                    plans[index] = Plan::Rate {
                        period,
                        origin: at,
                        wall_origin,
                        index: 0,
                    };
                    self.fire_rate(job, plans, fired);
                }
                ScheduleKind::FixedDelay(delay) => {
                    plans[index] = Plan::Delay(delay);
                    self.fire_delay(job, at, fired);
                }
            },
            Plan::Rate { .. } => self.fire_rate(job, plans, fired),
            Plan::Delay(_) => self.fire_delay(job, at, fired),
            Plan::Cron { .. } | Plan::Done => {}
        }
    }

    /// The cron fire time `fire` has come (due at `due` on the monotonic clock).
    fn fire_cron(
        &self,
        job: u32,
        fire: DateTime<Utc>,
        due: Instant,
        plans: &mut [Plan],
        fired: &mut Vec<Fired>,
    ) {
        let (prepared, status) = (&self.jobs[job as usize], &self.statuses[job as usize]);
        let runtime = &self.runtime;
        // A pause may have carried us past later fire times too: only the latest counts.
        let now: DateTime<Utc> = runtime.clock.now().into();
        let mut latest = fire;
        let mut passed_over = 0u32;
        while let Some(next) = prepared.next_cron_fire(latest, runtime)
            && next <= now
        {
            passed_over += 1;
            latest = next;
        }
        prepared.report_passed_over(passed_over, fire.into(), status);
        let gap = prepared
            .next_cron_fire(latest, runtime)
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
        plans[job as usize] = Plan::Cron { after: latest };
        fired.push((job, due, true));
    }

    /// The fixed-rate grid's latest tick due now: ticks a pause passed over are counted as
    /// missed, and firing continues on the grid; it never stalls.
    fn fire_rate(&self, job: u32, plans: &mut [Plan], fired: &mut Vec<Fired>) {
        let Plan::Rate {
            period,
            origin,
            wall_origin,
            index,
        } = &mut plans[job as usize]
        else {
            return;
        };
        let (prepared, status) = (&self.jobs[job as usize], &self.statuses[job as usize]);
        let now = Instant::now();
        let latest = grid_index(*origin, *period, now).max(*index);
        let Some(due) = grid(*origin, *period, *index) else {
            return;
        };
        let wall_due = self.runtime.clock.now() - now.saturating_duration_since(due);
        prepared.report_passed_over(latest - *index, wall_due, status);
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
        fired.push((job, due, true));
    }

    /// A fixed-delay tick due at `at`.
    fn fire_delay(&self, job: u32, at: Instant, fired: &mut Vec<Fired>) {
        self.statuses[job as usize].set_next_fire(None);
        let due = Due {
            at,
            fire: self.runtime.clock.now() - Instant::now().saturating_duration_since(at),
            allowance: Duration::ZERO,
            rerun: None,
            catch_up: None,
            claim: None,
            claimed: None,
        };
        fired.push((job, due, true));
    }

    /// Starts the ticks fired at one instant, each as a task of its own (the timer hears of
    /// its end). The locks of those that have one are claimed together first, in one call to
    /// the provider: one round trip where the store batches.
    fn launch(&self, mut fired: Vec<Fired>, tx: &mpsc::UnboundedSender<(u32, bool)>) {
        if fired.len() == 1
            && let Some((job, due, skip_passed)) = fired.pop()
        {
            // Alone at its instant: the tick makes its checks and asks for its lock itself.
            let ended = Ended {
                job,
                tx: tx.clone(),
                skip_passed,
            };
            return self.spawn_tick(job, due, ended);
        }
        let mut claims = Vec::new();
        // A batch names each lock once: a second job on the same lock asks for it itself.
        let mut names = HashSet::new();
        for (job, due, skip_passed) in fired {
            let index = job as usize;
            let ended = Ended {
                job,
                tx: tx.clone(),
                skip_passed,
            };
            let (prepared, status) = (&self.jobs[index], &self.statuses[index]);
            match (&prepared.lock, &self.runtime.executor) {
                (Some(lock), Some(_))
                    if due.rerun.is_none() && names.insert(lock.config.shared_name()) =>
                {
                    // A tick that may not start ends here (`ended` reports it).
                    if prepared.may_fire(&self.runtime, status, &due) {
                        claims.push((job, due, ended));
                    }
                }
                _ => self.spawn_tick(job, due, ended),
            }
        }
        let Some(executor) = self.runtime.executor.clone() else {
            return;
        };
        if claims.len() < 2 {
            // Alone at its instant: the tick asks for its lock itself.
            for (job, due, ended) in claims {
                self.spawn_tick(job, due, ended);
            }
            return;
        }
        let mut configs = Vec::with_capacity(claims.len());
        let mut heartbeats = Vec::with_capacity(claims.len());
        for (job, due, _) in &mut claims {
            let lock = self.jobs[*job as usize].lock.as_ref();
            let launch = PreparedJob::<S>::tick_launch(due);
            if let Some((config, _, renew_until)) = lock.map(|lock| lock.config_for(&launch)) {
                configs.push(config);
                heartbeats.push(renew_until);
            }
        }
        let timer = self.clone_handles();
        self.runtime.tasks.spawn(async move {
            let answers = executor.claim_many(&configs).await;
            for ((job, mut due, ended), (claimed, renew_until)) in
                claims.into_iter().zip(answers.into_iter().zip(heartbeats))
            {
                due.claimed = Some((claimed, renew_until));
                timer.spawn_tick(job, due, ended);
            }
        });
    }

    /// Runs one tick as a task of its own; `ended` tells the timer when it is over.
    fn spawn_tick(&self, job: u32, due: Due, ended: Ended) {
        let index = job as usize;
        let (prepared, status) = (
            Arc::clone(&self.jobs[index]),
            Arc::clone(&self.statuses[index]),
        );
        let (state, runtime) = (self.state.clone(), Arc::clone(&self.runtime));
        self.runtime.tasks.spawn(async move {
            let _ended = ended;
            prepared.tick(state, &runtime, &status, due).await;
        });
    }

    /// What a task needs to start ticks: the shared jobs, their statuses, the state.
    fn clone_handles(&self) -> Self {
        Timer {
            jobs: Arc::clone(&self.jobs),
            statuses: Arc::clone(&self.statuses),
            state: self.state.clone(),
            runtime: Arc::clone(&self.runtime),
        }
    }

    /// A job's tick ended: its next fire time goes on the timer.
    fn reschedule(&self, job: u32, skip_passed: bool, plans: &mut [Plan], queues: &mut Queues) {
        let index = job as usize;
        let (prepared, status) = (&self.jobs[index], &self.statuses[index]);
        match &mut plans[index] {
            Plan::Cron { after } => {
                let mut after = *after;
                if skip_passed {
                    let now: DateTime<Utc> = self.runtime.clock.now().into();
                    let mut overlapped = 0u32;
                    while let Some(next) = prepared.next_cron_fire(after, &self.runtime)
                        && next <= now
                    {
                        overlapped += 1;
                        after = next;
                    }
                    prepared.report_overlap(overlapped, status);
                }
                plans[index] = Plan::Cron { after };
                self.schedule_cron(job, after, plans, queues);
            }
            Plan::Rate {
                period,
                origin,
                index: latest,
                ..
            } => {
                let next = grid_index(*origin, *period, Instant::now())
                    .saturating_add(1)
                    .max(latest.saturating_add(1));
                prepared.report_overlap(next - *latest - 1, status);
                *latest = next;
                // Beyond about 4 billion ticks (or a grid past the clock's range) the job ends.
                match grid(*origin, *period, next) {
                    Some(due) => {
                        status.set_next_fire(Some(
                            self.runtime.clock.now()
                                + due.saturating_duration_since(Instant::now()),
                        ));
                        queues.mono.push(Reverse((due, job)));
                    }
                    None => {
                        tracing::warn!(job = %prepared.job.name, "fixed-rate schedule exhausted");
                        status.set_next_fire(None);
                        plans[index] = Plan::Done;
                    }
                }
            }
            Plan::Delay(delay) => {
                status.set_next_fire(Some(self.runtime.clock.now() + *delay));
                queues.mono.push(Reverse((Instant::now() + *delay, job)));
            }
            Plan::Start | Plan::Done => {}
        }
    }

    /// Puts a cron job's first fire time after `after` on the timer.
    fn schedule_cron(
        &self,
        job: u32,
        after: DateTime<Utc>,
        plans: &mut [Plan],
        queues: &mut Queues,
    ) {
        let index = job as usize;
        let (prepared, status) = (&self.jobs[index], &self.statuses[index]);
        match prepared.next_cron_fire(after, &self.runtime) {
            Some(fire) => {
                status.set_next_fire(Some(fire.into()));
                queues.wall.push(Reverse((fire.into(), job)));
            }
            None => {
                tracing::warn!(job = %prepared.job.name, "cron schedule has no further fire time");
                status.set_next_fire(None);
                plans[index] = Plan::Done;
            }
        }
    }
}

impl Queues {
    /// When to wake next, from a reading of both clocks: the earliest monotonic deadline, or
    /// the earliest wall-clock fire time as far as the monotonic clock can tell (at most
    /// [`MAX_WALL_SLEEP`] ahead, to notice clock steps). `None`: nothing queued.
    fn wake(&self, wall_now: SystemTime, now: Instant) -> Option<Instant> {
        let mono = self.mono.peek().map(|&Reverse((at, _))| at);
        let wall =
            self.wall
                .peek()
                .map(|&Reverse((fire, _))| match fire.duration_since(wall_now) {
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

fn job_index(index: usize) -> u32 {
    u32::try_from(index).expect("fewer than 4 billion jobs")
}

/// The fixed-rate grid's tick `index`: `origin + index × period`, if the clock reaches it.
fn grid(origin: Instant, period: Duration, index: u32) -> Option<Instant> {
    period
        .checked_mul(index)
        .and_then(|d| origin.checked_add(d))
}

/// The grid index of the latest tick due at `now`.
fn grid_index(origin: Instant, period: Duration, now: Instant) -> u32 {
    u32::try_from(now.saturating_duration_since(origin).as_nanos() / period.as_nanos())
        .unwrap_or(u32::MAX)
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
