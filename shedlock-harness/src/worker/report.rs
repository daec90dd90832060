//! What a worker reports beyond lock events: the scheduler's missed and overlapped ticks (from
//! its job status), and an election's changes.

use std::collections::HashMap;
use std::time::Duration;

use shedlock::{LeaderState, Scheduler};
use tokio::sync::watch;

use super::emit;
use super::state::{Count, WorkerState};
use crate::event::{Event, now_us};

/// How often the worker reads the scheduler's job status.
const STATUS_EVERY: Duration = Duration::from_millis(50);

/// Reports what the scheduler counted per job since the last call: ticks missed (passed over
/// during a pause, or too late) and ticks skipped because the previous run still went on.
#[derive(Debug, Default)]
pub(super) struct StatusReporter {
    seen: HashMap<String, (u64, u64)>,
}

impl StatusReporter {
    pub(super) fn report(&mut self, scheduler: &Scheduler, state: &WorkerState) {
        for status in scheduler.status() {
            let Some(lock) = status.lock_name.clone() else {
                continue; // leader-only work: its ticks are not lock ticks
            };
            let seen = self.seen.entry(lock.clone()).or_default();
            let (missed, overlapped) = (status.missed_ticks, status.overlapped_ticks);
            if missed > seen.0 {
                state.count_by(Count::Missed, missed - seen.0);
                emit(&Event::Missed {
                    lock: lock.clone(),
                    count: missed - seen.0,
                    at: now_us(),
                });
            }
            if overlapped > seen.1 {
                state.count_by(Count::Overlapped, overlapped - seen.1);
                emit(&Event::Overlapped {
                    lock,
                    count: overlapped - seen.1,
                    at: now_us(),
                });
            }
            *seen = (missed, overlapped);
        }
    }

    /// Reports every `STATUS_EVERY` until `until` completes, then once more.
    pub(super) async fn run_until(
        &mut self,
        scheduler: &Scheduler,
        state: &WorkerState,
        until: impl Future<Output = ()>,
    ) {
        let mut until = std::pin::pin!(until);
        let mut every = tokio::time::interval(STATUS_EVERY);
        loop {
            tokio::select! {
                () = &mut until => break,
                _ = every.tick() => self.report(scheduler, state),
            }
        }
        self.report(scheduler, state);
    }
}

/// Prints `leader` and `follower` lines as the election's state changes, until the watch
/// closes.
pub(super) async fn watch_election(mut changes: watch::Receiver<LeaderState>) {
    let mut current = LeaderState::Follower;
    loop {
        let state = *changes.borrow_and_update();
        match (current, state) {
            (LeaderState::Follower, LeaderState::Leader { term }) => {
                emit(&Event::Leader { term, at: now_us() });
            }
            (LeaderState::Leader { .. }, LeaderState::Follower) => {
                emit(&Event::Follower { at: now_us() });
            }
            _ => {}
        }
        current = state;
        if changes.changed().await.is_err() {
            return;
        }
    }
}
