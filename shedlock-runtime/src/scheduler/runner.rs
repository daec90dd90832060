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

mod fire;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::control::RemoveMode;
use super::recovery::Follow;
use super::roster::{Command, Placed, Roster};
use super::runtime::{PreparedJob, Runtime};
use super::status::{JobState, JobStatus};
use super::timing::{Plan, grid, next_on_grid};

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
    /// Removals waiting for a job's tick in flight to end, by slot (the job is being removed
    /// while its slot is here): kept apart, so the jobs' slots do not each carry a list.
    removals: HashMap<u32, Vec<oneshot::Sender<JobStatus>>>,
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
            removals: HashMap::new(),
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
            self.queues.trim();
            self.launch(fired);
        }
        for cell in &self.cells {
            if let Some(slot) = &cell.job {
                slot.status.set_next_fire(None);
            }
        }
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
                    current.plan = current.plan.replaced(&job.schedule, running, now, wall_now);
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
                removed.status.watch.retire();
                removed.status.set_next_fire(None);
                self.removals.entry(slot).or_default().push(done);
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
        self.roster.forget(&gone.job.name);
        let status = gone.status.snapshot(&*gone.job);
        for done in self.removals.remove(&slot).unwrap_or_default() {
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
                let delay = armed.job.schedule.initial_delay;
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
                        armed
                            .status
                            .set_next_fire(Some(wall_now + due.saturating_duration_since(now)));
                        self.queues.mono.push(Reverse((due, slot, epoch)));
                    }
                    None => {
                        tracing::warn!(job = %armed.job.name, "fixed-rate schedule exhausted");
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
        let removing = self.removals.contains_key(&slot);
        let Some(ended) = self.slot(slot) else {
            return;
        };
        ended.running = None;
        if removing {
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
                let job = &current.job.name;
                tracing::warn!(%job, "cron schedule has no further fire time");
                current.status.set_next_fire(None);
                current.plan = Plan::Done;
            }
        }
    }
}

impl Queues {
    /// Gives back the room a burst took (100,000 jobs' starts queued at once) once it passed.
    fn trim(&mut self) {
        fn trim<T: Ord>(heap: &mut BinaryHeap<T>) {
            if heap.capacity() > 1024 && heap.len() < heap.capacity() / 4 {
                heap.shrink_to(heap.len() * 2);
            }
        }
        trim(&mut self.mono);
        trim(&mut self.wall);
    }

    /// When to wake next, from a reading of both clocks: the earliest monotonic deadline, or
    /// the earliest wall-clock fire time as far as the monotonic clock can tell (at most
    /// [`MAX_WALL_SLEEP`] ahead, to notice clock steps). `None`: nothing queued.
    fn wake(&self, wall_now: SystemTime, now: Instant) -> Option<Instant> {
        let mono = self.mono.peek().map(|&Reverse((at, _, _))| at);
        let wall =
            self.wall.peek().map(
                |&Reverse((fire, _, _))| match fire.duration_since(wall_now) {
                    Ok(remaining) => now + remaining.min(MAX_WALL_SLEEP),
                    Err(_) => now,
                },
            );
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
