//! A running scheduler's jobs by name: what `Scheduler::status`, `run_now` and
//! [`JobControl`](super::JobControl) read and change, and the changes passed on to the timer.
//!
//! Each job has a slot: its place on the timer, reused once the job is gone (removed, its tick
//! in flight ended). The timer learns of changes through a channel, in the order they were
//! made here, and frees a removed job's slot itself, so a removal completes even when nobody
//! awaits it.

use std::any::Any;
use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use tokio::sync::{mpsc, oneshot};

use super::RunNowFuture;
use super::control::RemoveMode;
use super::runtime::{PreparedJob, Runtime};
use super::status::{JobState, JobStatus};
use crate::{Error, Job, LeaderElection, SchedulerConfig};
use shedlock_core::JobDefinition;

/// A change for the timer; `done` is answered once the timer made it.
pub(crate) enum Command<S> {
    Add {
        slot: u32,
        job: Arc<PreparedJob<S>>,
        status: Arc<JobState>,
        done: oneshot::Sender<()>,
    },
    Replace {
        slot: u32,
        job: Arc<PreparedJob<S>>,
        done: oneshot::Sender<()>,
    },
    /// Answered with the job's last status once it is gone.
    Remove {
        slot: u32,
        mode: RemoveMode,
        done: oneshot::Sender<JobStatus>,
    },
}

/// The jobs of one scheduler over state `S`, and what preparing another one needs.
pub(crate) struct Roster<S> {
    pub(crate) state: S,
    pub(crate) runtime: Arc<Runtime>,
    config: SchedulerConfig,
    elections: HashMap<String, Arc<LeaderElection>>,
    /// Whether the store keeps run records (jobs that rerun interrupted ticks need them).
    records: bool,
    listing: Mutex<Listing<S>>,
    /// Counts the jobs added, replaced and removed since the start.
    changes: AtomicU64,
    /// To the timer; `None` when the scheduler fires nothing (`enabled = false`).
    commands: Option<mpsc::UnboundedSender<Command<S>>>,
}

#[derive(Default)]
struct Listing<S> {
    jobs: HashSet<Listed<S>>,
    /// Slots given back by removed jobs.
    free: Vec<u32>,
    /// The next slot never used.
    next: u32,
}

/// A job as listed: found by its name (borrowed from its definition: no copy).
struct Listed<S> {
    slot: u32,
    job: Arc<PreparedJob<S>>,
    status: Arc<JobState>,
    /// A removal is under way (the job's tick in flight has not ended).
    removing: bool,
}

impl<S> Borrow<str> for Listed<S> {
    fn borrow(&self) -> &str {
        &self.job.name
    }
}

impl<S> Hash for Listed<S> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        let name: &str = self.borrow();
        name.hash(state);
    }
}

impl<S> PartialEq for Listed<S> {
    fn eq(&self, other: &Self) -> bool {
        self.job.name == other.job.name
    }
}

impl<S> Eq for Listed<S> {}

/// A job ready for the timer: its slot, definition and status.
pub(crate) type Placed<S> = (u32, Arc<PreparedJob<S>>, Arc<JobState>);

impl<S: Clone + Send + Sync + 'static> Roster<S> {
    /// The roster of `jobs` (prepared, names unique), in registration order, and the jobs as
    /// the timer starts with them.
    pub(crate) fn new(
        state: S,
        runtime: Arc<Runtime>,
        config: SchedulerConfig,
        elections: HashMap<String, Arc<LeaderElection>>,
        records: bool,
        jobs: Vec<PreparedJob<S>>,
        commands: Option<mpsc::UnboundedSender<Command<S>>>,
    ) -> (Self, Vec<Placed<S>>) {
        let mut listing = Listing {
            jobs: HashSet::with_capacity(jobs.len()),
            free: Vec::new(),
            next: 0,
        };
        let mut placed = Vec::with_capacity(jobs.len());
        for job in jobs {
            let slot = listing.take_slot();
            let status = Arc::new(JobState::new());
            let job = Arc::new(job);
            placed.push((slot, Arc::clone(&job), Arc::clone(&status)));
            listing.jobs.insert(Listed {
                slot,
                job,
                status,
                removing: false,
            });
        }
        let roster = Roster {
            state,
            runtime,
            config,
            elections,
            records,
            listing: Mutex::new(listing),
            changes: AtomicU64::new(0),
            commands,
        };
        (roster, placed)
    }

    /// `job` checked against the scheduler's configuration, its lock resolved.
    ///
    /// # Errors
    /// As [`prepare`].
    fn prepare(&self, job: Job<S>) -> Result<PreparedJob<S>, Error> {
        let has_provider = self.runtime.executor.is_some();
        let job = prepare(job, &self.config, has_provider, &self.elections)?;
        if job.reruns() && !self.records {
            return Err(no_records(&job.name));
        }
        Ok(job)
    }

    pub(crate) async fn add(&self, job: Job<S>) -> Result<(), Error> {
        let name = job.name.clone();
        self.refuse_after_shutdown(&name, "added")?;
        let job = Arc::new(self.prepare(job)?);
        let status = Arc::new(JobState::new());
        let done = {
            let mut listing = self.listing();
            if let Some(listed) = listing.jobs.get(&*job.name) {
                return Err(Error::Scheduler(format!(
                    "job `{}` {}: replace it, or remove it first",
                    job.name,
                    match listed.removing {
                        true => "is being removed",
                        false => "already exists",
                    }
                )));
            }
            let slot = listing.take_slot();
            listing.jobs.insert(Listed {
                slot,
                job: Arc::clone(&job),
                status: Arc::clone(&status),
                removing: false,
            });
            self.changes.fetch_add(1, Ordering::Relaxed);
            self.send(|done| Command::Add {
                slot,
                job,
                status,
                done,
            })
        };
        made(done, &name, "added").await
    }

    pub(crate) async fn replace(&self, job: Job<S>) -> Result<(), Error> {
        let name = job.name.clone();
        self.refuse_after_shutdown(&name, "replaced")?;
        let job = Arc::new(self.prepare(job)?);
        let done = {
            let mut listing = self.listing();
            let Some(listed) = listing.jobs.take(&*job.name) else {
                return Err(no_job(&job.name));
            };
            if listed.removing {
                let name = Arc::clone(&listed.job.name);
                listing.jobs.insert(listed);
                return Err(Error::Scheduler(format!("job `{name}` is being removed")));
            }
            // The job's status (and its one watcher of interrupted runs) is kept.
            let slot = listed.slot;
            listing.jobs.insert(Listed {
                job: Arc::clone(&job),
                ..listed
            });
            self.changes.fetch_add(1, Ordering::Relaxed);
            self.send(|done| Command::Replace { slot, job, done })
        };
        made(done, &name, "replaced").await
    }

    pub(crate) async fn remove(&self, name: &str, mode: RemoveMode) -> Result<JobStatus, Error> {
        self.refuse_after_shutdown(name, "removed")?;
        let done = {
            let mut listing = self.listing();
            let Some(mut listed) = listing.jobs.take(name) else {
                return Err(no_job(name));
            };
            let slot = listed.slot;
            let Some(commands) = &self.commands else {
                // No timer: nothing runs.
                listing.free.push(slot);
                return Ok(listed.status.snapshot(&*listed.job));
            };
            listed.removing = true;
            listing.jobs.insert(listed);
            let (done, removed) = oneshot::channel();
            // Sent under the listing's lock: the timer sees changes in the order made here.
            let _ = commands.send(Command::Remove { slot, mode, done });
            removed
        };
        done.await
            .map_err(|_| match self.runtime.shutdown.is_cancelled() {
                true => shutting_down(name, "removed"),
                // Another call's removal ended first; its caller has the job's last status.
                false => Error::Scheduler(format!("job `{name}` was removed by another call")),
            })
    }

    /// Called by the timer once a removed job is gone: its name and slot are free again.
    pub(crate) fn forget(&self, name: &str) {
        let mut listing = self.listing();
        if let Some(listed) = listing.jobs.take(name) {
            listing.free.push(listed.slot);
            self.changes.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The status of every job, in slot order: registration order, a job added at runtime
    /// in the place of one removed before, if any.
    pub(crate) fn status(&self) -> Vec<JobStatus> {
        let listing = self.listing();
        let mut jobs: Vec<&Listed<S>> = listing.jobs.iter().collect();
        jobs.sort_unstable_by_key(|listed| listed.slot);
        jobs.iter()
            .map(|listed| listed.status.snapshot(&*listed.job))
            .collect()
    }

    /// The job named `name` and its status, if listed.
    pub(crate) fn get(&self, name: &str) -> Option<(Arc<PreparedJob<S>>, Arc<JobState>)> {
        let listing = self.listing();
        let listed = listing.jobs.get(name)?;
        Some((Arc::clone(&listed.job), Arc::clone(&listed.status)))
    }

    fn listing(&self) -> MutexGuard<'_, Listing<S>> {
        self.listing.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Sends the command `make` builds to the timer (under the listing's lock, so in the order
    /// the changes were made); the answer comes on the receiver. Without a timer, answered now.
    fn send(&self, make: impl FnOnce(oneshot::Sender<()>) -> Command<S>) -> oneshot::Receiver<()> {
        let (done, made) = oneshot::channel();
        match &self.commands {
            Some(commands) => {
                let _ = commands.send(make(done));
            }
            None => {
                let _ = done.send(());
            }
        }
        made
    }

    fn refuse_after_shutdown(&self, name: &str, what: &str) -> Result<(), Error> {
        match self.runtime.shutdown.is_cancelled() {
            true => Err(shutting_down(name, what)),
            false => Ok(()),
        }
    }
}

impl<S> Listing<S> {
    fn take_slot(&mut self) -> u32 {
        self.free.pop().unwrap_or_else(|| {
            let slot = self.next;
            self.next = slot.checked_add(1).expect("fewer than 4 billion jobs");
            slot
        })
    }
}

/// Waits for the timer to make a change: it answers unless it stopped (shutdown).
async fn made(made: oneshot::Receiver<()>, name: &str, what: &str) -> Result<(), Error> {
    made.await.map_err(|_| shutting_down(name, what))
}

fn no_job(name: &str) -> Error {
    Error::Scheduler(format!("no job named `{name}`"))
}

fn shutting_down(name: &str, what: &str) -> Error {
    Error::Scheduler(format!(
        "the scheduler is shutting down: job `{name}` was not {what}"
    ))
}

pub(crate) fn no_records(job: &str) -> Error {
    Error::Scheduler(format!(
        "job `{job}` reruns interrupted runs, but its lock store keeps no run records"
    ))
}

/// `job` with its lock and thresholds resolved against `config`: what every run uses as is.
///
/// # Errors
/// [`Error::InvalidConfig`] naming the field and the job; [`Error::Scheduler`] for a locked job
/// without a provider, or a leader-only job whose election the scheduler does not run.
pub(crate) fn prepare<S>(
    job: Job<S>,
    config: &SchedulerConfig,
    has_provider: bool,
    elections: &HashMap<String, Arc<LeaderElection>>,
) -> Result<PreparedJob<S>, Error> {
    let leader = match &job.leader {
        Some(name) => match elections.get(name.as_ref()) {
            Some(election) => Some(Arc::clone(election)),
            // A disabled scheduler runs no elections, and no jobs.
            None if !config.enabled => None,
            None => {
                return Err(Error::Scheduler(format!(
                    "job `{}` follows election `{name}`, which this scheduler does not run: \
                     elections start with the scheduler, for the leader-only jobs registered \
                     before `start`",
                    job.name
                )));
            }
        },
        None => None,
    };
    if job.schedule.catch_up.is_some() && job.lock.is_none() {
        return Err(Error::invalid_config(
            "catch_up",
            format!(
                "job `{}` catches up missed ticks but has no lock: only a lock tells whether \
                 another instance ran the tick",
                job.name
            ),
        ));
    }
    let lock = job.resolve_lock(config)?;
    if let Some(lock) = &lock
        && !has_provider
    {
        return Err(Error::Scheduler(format!(
            "job `{}` runs under lock `{}` but the scheduler has no lock provider",
            job.name,
            lock.config.name()
        )));
    }
    // The lock's name is the job's, mostly: one copy for both.
    let name = match &lock {
        Some(lock) if lock.config.name() == job.name => lock.config.shared_name(),
        _ => Arc::from(&*job.name),
    };
    Ok(PreparedJob {
        name,
        schedule: job.schedule,
        run: job.run,
        lock,
        leader,
    })
}

/// A roster of any state, as the `Scheduler` (which does not know `S`) holds it.
pub(crate) trait AnyRoster: Send + Sync {
    fn status(&self) -> Vec<JobStatus>;
    /// A run by hand of the job `name`, if listed.
    fn run_now(&self, name: &str) -> Option<RunNowFuture>;
    /// For [`Scheduler::job_control`](super::Scheduler::job_control) to find `Roster<S>`.
    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
    /// The state's type name, for errors.
    fn state_type(&self) -> &'static str;
    /// How many jobs were added, replaced or removed since the start: whether to publish them
    /// again.
    fn changes(&self) -> u64;
    /// What this instance publishes of its jobs to the fleet's board.
    fn definitions(&self) -> Vec<JobDefinition>;
    /// Whether the job `name` is listed.
    fn carries(&self, name: &str) -> bool;
}

impl<S: Clone + Send + Sync + 'static> AnyRoster for Roster<S> {
    fn status(&self) -> Vec<JobStatus> {
        Roster::status(self)
    }

    fn run_now(&self, name: &str) -> Option<RunNowFuture> {
        let (job, _) = self.get(name)?;
        Some(Box::pin(super::run_now(
            job,
            Arc::clone(&self.runtime),
            self.state.clone(),
        )))
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }

    fn state_type(&self) -> &'static str {
        std::any::type_name::<S>()
    }

    fn changes(&self) -> u64 {
        self.changes.load(Ordering::Relaxed)
    }

    fn definitions(&self) -> Vec<JobDefinition> {
        let jobs: Vec<Arc<PreparedJob<S>>> = {
            let listing = self.listing();
            let mut listed: Vec<&Listed<S>> = listing.jobs.iter().collect();
            listed.sort_unstable_by_key(|listed| listed.slot);
            listed
                .iter()
                .map(|listed| Arc::clone(&listed.job))
                .collect()
        };
        jobs.iter()
            .map(|job| {
                super::fleet::definition(
                    &job.name,
                    &job.schedule,
                    self.runtime.zone,
                    job.lock.as_ref().map(|lock| &lock.config),
                    job.leader.as_ref().map(|election| election.name()),
                )
            })
            .collect()
    }

    fn carries(&self, name: &str) -> bool {
        self.listing().jobs.contains(name)
    }
}
