//! The recording calls the executor, the scheduler and elections make (feature `metrics`).

use std::sync::Mutex;

use metrics::{counter, gauge, histogram};
use tokio::time::Instant;

use super::lock_label;
use super::names::*;
use shedlock_core::Error;

use crate::{JobOutcome, LockEvent};

/// Records one executor event; called for every event of every executor.
pub(crate) fn lock_event(event: &LockEvent<'_>) {
    let (name, lock) = match event {
        LockEvent::Attempt { lock_name } => (LOCK_ACQUIRE_ATTEMPTS, *lock_name),
        LockEvent::Acquired(lease) => (LOCK_ACQUIRED, lease.name()),
        LockEvent::Skipped { lock_name } => (LOCK_NOT_ACQUIRED, *lock_name),
        LockEvent::AcquireFailed { lock_name, error } => {
            store_error(lock_name, error);
            return;
        }
        LockEvent::Released(lease) => (LOCK_RELEASED, lease.name()),
        LockEvent::ReleaseFailed { lease, error } => {
            store_error(lease.name(), error);
            return;
        }
        LockEvent::Extended(lease) => (LOCK_EXTENSIONS, lease.name()),
        LockEvent::ExtendFailed { lease, error } => {
            store_error(lease.name(), error);
            (LOCK_EXTENSION_FAILURES, lease.name())
        }
        LockEvent::Lost(lease) => (LOCK_LOST, lease.name()),
    };
    match lock_label().value(lock) {
        Some(lock) => counter!(name, "lock" => lock).increment(1),
        None => counter!(name).increment(1),
    }
}

/// Counts `error` if it is the store's (a refusal is not).
fn store_error(lock: &str, error: &Error) {
    let Error::Store { operation, .. } = error else {
        return;
    };
    let operation = operation.label();
    match lock_label().value(lock) {
        Some(lock) => counter!(LOCK_STORE_ERRORS, "lock" => lock, "operation" => operation),
        None => counter!(LOCK_STORE_ERRORS, "operation" => operation),
    }
    .increment(1);
}

/// One job's metrics, kept with its status (the job's name is passed in: no copy kept). Each
/// call looks its series up in the recorder of the moment (ticks are rare), so a recorder
/// installed after the scheduler started still gets them.
#[derive(Debug, Default)]
pub(crate) struct JobMetrics {
    started: Mutex<Option<Instant>>,
}

impl JobMetrics {
    /// A tick of the job `job` is being handled (the lock asked for, the job run), or no
    /// longer.
    pub(crate) fn running(&self, job: &str, running: bool) {
        if running {
            *self.started.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        }
        gauge!(JOB_RUNNING, "job" => job.to_owned()).set(if running { 1.0 } else { 0.0 });
    }

    pub(crate) fn missed(&self, job: &str, ticks: u32) {
        counter!(JOB_MISSED_TICKS, "job" => job.to_owned()).increment(u64::from(ticks));
    }

    /// How a tick of the job `job` ended; for a run, also how long it took.
    pub(crate) fn outcome(&self, job: &str, outcome: &JobOutcome) {
        let started = self
            .started
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let ran = matches!(
            outcome,
            JobOutcome::Executed { .. }
                | JobOutcome::Failed(_)
                | JobOutcome::Panicked(_)
                | JobOutcome::LeadershipLost
                | JobOutcome::Aborted
        );
        if let (true, Some(started)) = (ran, started) {
            histogram!(JOB_RUN_DURATION, "job" => job.to_owned())
                .record(started.elapsed().as_secs_f64());
        }
        let outcome = match outcome {
            JobOutcome::Executed { .. } => "succeeded",
            JobOutcome::Skipped => "skipped",
            JobOutcome::NotLeader => "not_leader",
            JobOutcome::Paused => "paused",
            JobOutcome::Missed { .. } => "missed",
            JobOutcome::LeadershipLost => "leadership_lost",
            JobOutcome::Failed(_) => "failed",
            JobOutcome::Panicked(_) => "panicked",
            JobOutcome::StoreError(_) => "store_error",
            JobOutcome::Aborted => "aborted",
        };
        counter!(JOB_TICKS, "job" => job.to_owned(), "outcome" => outcome).increment(1);
    }
}

/// One candidacy's metrics (looked up at each change, as a job's).
#[derive(Debug)]
pub(crate) struct ElectionMetrics {
    election: String,
}

impl ElectionMetrics {
    pub(crate) fn new(election: &str) -> Self {
        ElectionMetrics {
            election: election.to_owned(),
        }
    }

    pub(crate) fn elected(&self) {
        counter!(ELECTION_TERMS, "election" => self.election.clone()).increment(1);
        gauge!(ELECTION_LEADER, "election" => self.election.clone()).set(1.0);
    }

    pub(crate) fn stepped_down(&self) {
        counter!(ELECTION_HANDOVERS, "election" => self.election.clone()).increment(1);
        gauge!(ELECTION_LEADER, "election" => self.election.clone()).set(0.0);
    }
}
