//! The recording calls the executor, the scheduler and elections make (feature `metrics`).

use std::sync::Mutex;

use metrics::{Counter, Gauge, Histogram, counter, gauge, histogram};
use tokio::time::Instant;

use super::lock_label;
use super::names::*;
use crate::{Error, JobOutcome, LockEvent, Operation};

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
    let operation = match operation {
        Operation::Acquire => "acquire",
        Operation::Release => "release",
        Operation::Extend => "extend",
        Operation::Schema => "schema",
        Operation::Read => "read",
        Operation::Runs => "runs",
    };
    match lock_label().value(lock) {
        Some(lock) => counter!(LOCK_STORE_ERRORS, "lock" => lock, "operation" => operation),
        None => counter!(LOCK_STORE_ERRORS, "operation" => operation),
    }
    .increment(1);
}

/// One job's metrics, kept with its status.
#[derive(Debug)]
pub(crate) struct JobMetrics {
    job: String,
    running: Gauge,
    duration: Histogram,
    missed: Counter,
    started: Mutex<Option<Instant>>,
}

impl JobMetrics {
    pub(crate) fn new(job: &str) -> Self {
        let label = job.to_owned();
        JobMetrics {
            running: gauge!(JOB_RUNNING, "job" => label.clone()),
            duration: histogram!(JOB_RUN_DURATION, "job" => label.clone()),
            missed: counter!(JOB_MISSED_TICKS, "job" => label.clone()),
            job: label,
            started: Mutex::new(None),
        }
    }

    /// A tick is being handled (the lock asked for, the job run), or no longer.
    pub(crate) fn running(&self, running: bool) {
        if running {
            *self.started.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        }
        self.running.set(if running { 1.0 } else { 0.0 });
    }

    pub(crate) fn missed(&self, ticks: u32) {
        self.missed.increment(u64::from(ticks));
    }

    /// How a tick ended; for a run, also how long it took.
    pub(crate) fn outcome(&self, outcome: &JobOutcome) {
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
            self.duration.record(started.elapsed().as_secs_f64());
        }
        let outcome = match outcome {
            JobOutcome::Executed { .. } => "succeeded",
            JobOutcome::Skipped => "skipped",
            JobOutcome::NotLeader => "not_leader",
            JobOutcome::Missed { .. } => "missed",
            JobOutcome::LeadershipLost => "leadership_lost",
            JobOutcome::Failed(_) => "failed",
            JobOutcome::Panicked(_) => "panicked",
            JobOutcome::StoreError(_) => "store_error",
            JobOutcome::Aborted => "aborted",
        };
        counter!(JOB_TICKS, "job" => self.job.clone(), "outcome" => outcome).increment(1);
    }
}

/// One candidacy's metrics.
#[derive(Debug)]
pub(crate) struct ElectionMetrics {
    leader: Gauge,
    terms: Counter,
    handovers: Counter,
}

impl ElectionMetrics {
    pub(crate) fn new(election: &str) -> Self {
        let label = election.to_owned();
        ElectionMetrics {
            leader: gauge!(ELECTION_LEADER, "election" => label.clone()),
            terms: counter!(ELECTION_TERMS, "election" => label.clone()),
            handovers: counter!(ELECTION_HANDOVERS, "election" => label),
        }
    }

    pub(crate) fn elected(&self) {
        self.terms.increment(1);
        self.leader.set(1.0);
    }

    pub(crate) fn stepped_down(&self) {
        self.handovers.increment(1);
        self.leader.set(0.0);
    }
}
