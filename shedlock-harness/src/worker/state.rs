//! What every job of a worker shares: its store, its counters, and the job body that journals
//! each execution behind the fencing guard.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use shedlock::{LockContext, LockEvent};

use super::emit;
use crate::backend::JournalRow;
use crate::event::{Counters, Event, WriteOutcome, now_us, unix_us};
use crate::store::Store;

/// Shared by every job of a worker.
#[derive(Debug)]
pub(super) struct WorkerState {
    pub(super) store: Store,
    pub(super) journal: String,
    pub(super) holder: String,
    pub(super) tick_us: i64,
    pub(super) job: Duration,
    pub(super) counters: [AtomicU64; 10],
    /// Leases reported `acquired` and not yet released or lost: a `Lost` lease missing here is
    /// an acquire answer that came after its local deadline, never used (its tick's outcome).
    pub(super) live: std::sync::Mutex<std::collections::HashSet<(String, u64)>>,
    /// The tick of each lock's latest attempt: the run that follows it (a job never overlaps
    /// itself in one worker) belongs to that tick.
    pub(super) ticks: std::sync::Mutex<std::collections::HashMap<String, i64>>,
}

/// Indices into `WorkerState::counters`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Count {
    Attempts,
    Acquired,
    Skipped,
    Errors,
    Accepted,
    Rejected,
    Failed,
    Stopped,
    Missed,
    Overlapped,
}

impl WorkerState {
    pub(super) fn count_by(&self, which: Count, by: u64) {
        self.counters[which as usize].fetch_add(by, Ordering::Relaxed);
    }

    fn count(&self, which: Count) {
        self.counters[which as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn counters(&self) -> Counters {
        let c = |which: Count| self.counters[which as usize].load(Ordering::Relaxed);
        Counters {
            attempts: c(Count::Attempts),
            acquired: c(Count::Acquired),
            skipped: c(Count::Skipped),
            errors: c(Count::Errors),
            accepted: c(Count::Accepted),
            rejected: c(Count::Rejected),
            failed: c(Count::Failed),
            stopped: c(Count::Stopped),
            missed: c(Count::Missed),
            overlapped: c(Count::Overlapped),
        }
    }

    /// A tick fired and its lock is about to be asked for (the executor announces every
    /// attempt, at the tick): count it and remember its number for the run.
    fn attempt(&self, lock: &str, at: i64) {
        let tick = at / self.tick_us;
        self.count(Count::Attempts);
        self.ticks
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(lock.to_owned(), tick);
        emit(&Event::Attempt {
            lock: lock.to_owned(),
            tick,
            at,
        });
    }

    /// The tick a starting run of `lock` belongs to: that of the lock's latest attempt.
    pub(super) fn tick_of(&self, lock: &str) -> i64 {
        let ticks = self.ticks.lock().unwrap_or_else(|e| e.into_inner());
        ticks
            .get(lock)
            .copied()
            .unwrap_or_else(|| now_us() / self.tick_us)
    }

    pub(super) fn on_event(&self, event: &LockEvent<'_>) {
        let at = now_us();
        match event {
            LockEvent::Attempt { lock_name } => self.attempt(lock_name, at),
            LockEvent::Acquired(lease) => {
                self.count(Count::Acquired);
                self.live_leases()
                    .insert((lease.name().to_owned(), lease.fencing_token()));
                emit(&Event::Acquired {
                    lock: lease.name().to_owned(),
                    token: lease.fencing_token(),
                    at,
                    since: unix_us(lease.locked_at()),
                    until: unix_us(lease.lock_until()),
                });
            }
            LockEvent::Skipped { lock_name } => {
                self.count(Count::Skipped);
                emit(&Event::Skipped {
                    lock: (*lock_name).to_owned(),
                    at,
                });
            }
            LockEvent::AcquireFailed { lock_name, error } => {
                self.count(Count::Errors);
                emit(&Event::AcquireFailed {
                    lock: (*lock_name).to_owned(),
                    at,
                    error: error.to_string(),
                });
            }
            LockEvent::Released(lease) => {
                self.live_leases()
                    .remove(&(lease.name().to_owned(), lease.fencing_token()));
                emit(&Event::Released {
                    lock: lease.name().to_owned(),
                    token: lease.fencing_token(),
                    at,
                });
            }
            LockEvent::Lost(lease) => {
                let key = (lease.name().to_owned(), lease.fencing_token());
                emit(&Event::Lost {
                    lock: key.0.clone(),
                    token: key.1,
                    at,
                });
                if !self.live_leases().remove(&key) {
                    // A late acquire answer: the executor gave the lease back unused, so this
                    // attempt was not executed (nothing else reports its outcome).
                    self.count(Count::Skipped);
                    emit(&Event::Skipped { lock: key.0, at });
                }
            }
            _ => {}
        }
    }

    fn live_leases(&self) -> std::sync::MutexGuard<'_, std::collections::HashSet<(String, u64)>> {
        self.live.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The job body: work for `job` (or until the lost-lock signal), then journal the execution
    /// behind the fencing guard. The write is attempted even after the signal, on purpose: the
    /// guard, not the job's good manners, must keep a stale holder out.
    pub(super) async fn run_job(&self, lock: &str, tick: i64) -> Result<(), String> {
        let context = LockContext::current().map_err(|e| e.to_string())?;
        let token = context.fencing_token();
        let start = now_us();
        emit(&Event::Start {
            lock: lock.to_owned(),
            token,
            at: start,
        });
        // Reports the run stopped if its future is dropped before the write is reported.
        let mut stopped = StopGuard {
            state: self,
            lock,
            token,
            armed: true,
        };
        tokio::select! {
            biased;
            () = context.cancelled() => {}
            () = tokio::time::sleep(self.job) => {}
        }
        let lost = context.is_lost();
        let row = JournalRow {
            id: 0,
            lock: lock.to_owned(),
            token: i64::try_from(token).unwrap_or(i64::MAX),
            holder: self.holder.clone(),
            tick,
            start,
            end: now_us(),
        };
        let outcome = self.store.fenced_write(&self.journal, &row).await;
        stopped.armed = false;
        self.count(match outcome {
            WriteOutcome::Accepted => Count::Accepted,
            WriteOutcome::Rejected => Count::Rejected,
            WriteOutcome::Failed(_) => Count::Failed,
        });
        emit(&Event::Write {
            lock: row.lock,
            token,
            tick,
            start,
            end: row.end,
            lost,
            outcome,
        });
        Ok(())
    }
}

/// Emits [`Event::Stopped`] (and counts it) when a run's future is dropped before its write
/// was reported.
struct StopGuard<'a> {
    state: &'a WorkerState,
    lock: &'a str,
    token: u64,
    armed: bool,
}

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.state.count(Count::Stopped);
            emit(&Event::Stopped {
                lock: self.lock.to_owned(),
                token: self.token,
                at: now_us(),
            });
        }
    }
}
