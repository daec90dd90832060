//! Jobs added, replaced and removed on a running scheduler: [`JobControl`].

use std::fmt;
use std::sync::Arc;

use super::roster::Roster;
use super::status::JobStatus;
use crate::{Error, Job};

/// Adds, replaces and removes the jobs of a running [`Scheduler`](crate::Scheduler) whose
/// jobs take state `S`; from [`Scheduler::job_control`](crate::Scheduler::job_control).
/// Cheap to clone, and usable from any task (an admin endpoint, a tenant-change listener).
///
/// A job is known by its name, as in [`Scheduler::status`](crate::Scheduler::status) and
/// [`Scheduler::run_now`](crate::Scheduler::run_now). Changes take effect on the scheduler's
/// one timer (no task per job): each method returns once the timer made the change, so the
/// next tick follows it. A job never overlaps itself across a change: a tick already started
/// goes on under the definition it started with, and the job's next tick (of the new
/// definition) waits for it to end, as ticks always do.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::InMemoryLockProvider;
/// use shedlock_runtime::{Job, JobLock, JobRegistry, RemoveMode, Schedule, Scheduler};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), shedlock_core::Error> {
/// let scheduler = Scheduler::builder()
///     .provider(InMemoryLockProvider::new())
///     .registry(JobRegistry::new("tenant state"))
///     .start()
///     .await?;
/// let jobs = scheduler.job_control::<&str>()?;
/// let report = |schedule| {
///     Job::new("report-acme", schedule, |state: &str| async move { println!("{state}") })
///         .with_lock(JobLock::new("report-acme").expect("a valid name"))
/// };
/// jobs.add(report(Schedule::cron("0 0 6 * * *")?)).await?;
/// jobs.replace(report(Schedule::cron("0 30 7 * * *")?)).await?;
/// let last = jobs.remove("report-acme", RemoveMode::Finish).await?;
/// assert_eq!(last.executions, 0);
/// assert!(scheduler.status().is_empty());
/// # scheduler.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct JobControl<S> {
    pub(super) roster: Arc<Roster<S>>,
}

/// What [`JobControl::remove`] does with a tick of the job that is running.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RemoveMode {
    /// The running tick finishes; `remove` returns when it has. No later tick starts.
    #[default]
    Finish,
    /// The running tick is dropped at its next `.await` (as `JoinHandle::abort` does), its lock
    /// released and its run record (where the store keeps them) ended as interrupted with
    /// "cancelled: the job was removed from its scheduler", so no instance runs that tick
    /// again; the job's status shows it as [`JobOutcome::Aborted`](crate::JobOutcome::Aborted).
    /// A tick fired but not started yet does not start.
    Cancel,
}

impl<S: Clone + Send + Sync + 'static> JobControl<S> {
    /// Adds `job`, checked as [`SchedulerBuilder::start`](crate::SchedulerBuilder::start)
    /// checks the jobs of the registry, and starts it as `start` would (its initial delay, a
    /// catch-up of its missed tick); it is listed by
    /// [`Scheduler::status`](crate::Scheduler::status) at once.
    ///
    /// # Errors
    /// [`Error::Scheduler`] when a job of that name exists (or is being removed), when
    /// shutdown has begun, for a locked job on a scheduler without a lock provider, and for a
    /// leader-only job whose election the scheduler does not run (elections start with the
    /// scheduler, for the jobs registered before); [`Error::InvalidConfig`] naming the field
    /// (and the job) that is wrong.
    pub async fn add(&self, job: Job<S>) -> Result<(), Error> {
        self.roster.add(job).await
    }

    /// Replaces the job of `job`'s name with `job`: a new schedule, lock, retries, policy or
    /// closure. Its status (counts, last outcome) carries on.
    ///
    /// The next tick is the new definition's first fire time after both the change and the
    /// old definition's latest tick, so no tick runs twice across the change: a cron tick is
    /// named by its fire time, and one the old definition ran (or is running) is not run
    /// again by the new one, here or, under the same lock, on any instance (the store grants
    /// each tick once). A fixed-rate schedule continues from the old definition's latest tick
    /// (its next tick a new period after it); a fixed delay counts from the change. A job
    /// that had not fired yet starts afresh, with its initial delay.
    ///
    /// # Errors
    /// [`Error::Scheduler`] naming the job when no job has that name (or it is being
    /// removed), when shutdown has begun, and otherwise as [`add`](Self::add).
    pub async fn replace(&self, job: Job<S>) -> Result<(), Error> {
        self.roster.replace(job).await
    }

    /// Removes the job `name`: no tick of it starts any more; a running one finishes or is
    /// cancelled, as `mode` says. Returns the job's last status once it is gone (its running
    /// tick ended, its lock released): `last_outcome` says how that tick ended. Its name is
    /// free again then. Dropping the returned future does not stop the removal.
    ///
    /// A rerun of an interrupted tick that the job's recovery already started
    /// ([`OnInterrupted::Rerun`](crate::OnInterrupted::Rerun)) runs to its end; no other
    /// starts.
    ///
    /// # Errors
    /// [`Error::Scheduler`] naming the job when no job has that name, and when shutdown has
    /// begun (shutdown then ends the job's running tick as it ends every other).
    pub async fn remove(&self, name: &str, mode: RemoveMode) -> Result<JobStatus, Error> {
        self.roster.remove(name, mode).await
    }
}

impl<S> Clone for JobControl<S> {
    fn clone(&self) -> Self {
        JobControl {
            roster: Arc::clone(&self.roster),
        }
    }
}

impl<S> fmt::Debug for JobControl<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JobControl")
            .field("state", &std::any::type_name::<S>())
            .finish_non_exhaustive()
    }
}
