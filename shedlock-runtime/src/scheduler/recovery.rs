//! Interrupted runs of jobs that ask for a rerun ([`OnInterrupted::Rerun`]): an instance that
//! saw another hold the job's lock (its tick was skipped), or that starts while the job's
//! latest run is unfinished, follows that run in the store's records until it finishes; if its
//! holder's lease runs out first, the holder died or stalled, and this instance takes the lock
//! (a newer fencing token) and runs the tick again, once.
//!
//! [`OnInterrupted::Rerun`]: super::OnInterrupted::Rerun

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::run::{LOOK_BACK, latest_of_tick};
use super::runtime::{Due, PreparedJob, Runtime};
use super::status::JobState;
use crate::{Error, LockProvider, LockRecord, RunOutcome, RunQuery, RunRecord};

/// Whether a watcher follows a run of a job now (one at a time), and whether the job is gone
/// from its scheduler (removed: its watcher stops at its next look, and reruns nothing).
#[derive(Debug, Default)]
pub(crate) struct Watch {
    watching: AtomicBool,
    retired: AtomicBool,
}

impl Watch {
    /// The job was removed from its scheduler.
    pub(crate) fn retire(&self) {
        self.retired.store(true, Ordering::Release);
    }

    fn retired(&self) -> bool {
        self.retired.load(Ordering::Acquire)
    }
}

/// Which run a watcher follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Follow {
    /// The run of whoever holds the lock now.
    Holder,
    /// The lock's newest run, if unfinished.
    Newest,
    /// The run holding this fencing token.
    Token(u64),
    /// The newest attempt of this tick.
    Tick(Option<SystemTime>),
}

/// What a look at the store says to do.
#[derive(Debug)]
enum Next {
    Done,
    /// Look again after this long (or at a release hint).
    Wait(Duration),
    Rerun(RunRecord),
}

/// Shortest and longest wait between two looks while a run is held.
const MIN_WAIT: Duration = Duration::from_millis(50);
const MAX_WAIT: Duration = Duration::from_secs(60);

impl<S: Clone + Send + Sync + 'static> PreparedJob<S> {
    /// Starts following a run in the background unless this job already follows one, or does
    /// not ask for reruns, or its store keeps no records.
    pub(super) fn watch(
        &self,
        state: S,
        runtime: &Arc<Runtime>,
        status: &Arc<JobState>,
        follow: Follow,
    ) {
        let Some(executor) = &runtime.executor else {
            return;
        };
        let provider = Arc::clone(executor.provider());
        if !self.reruns() || runtime.shutdown.is_cancelled() || status.watch.retired() {
            return;
        }
        if provider.run_log().is_none() || provider.inspector().is_none() {
            return;
        }
        if status.watch.watching.swap(true, Ordering::AcqRel) {
            return;
        }
        let (job, runtime, status) = (self.clone(), Arc::clone(runtime), Arc::clone(status));
        runtime.tasks.clone().spawn(async move {
            job.follow(state, &runtime, &status, &provider, follow)
                .await;
            status.watch.watching.store(false, Ordering::Release);
        });
    }

    async fn follow(
        &self,
        state: S,
        runtime: &Arc<Runtime>,
        status: &Arc<JobState>,
        provider: &Arc<dyn LockProvider>,
        mut follow: Follow,
    ) {
        let Some(lock) = self.lock.as_ref().map(|lock| &lock.config) else {
            return;
        };
        let mut hints = provider.release_hints();
        let mut failures = 0u32;
        // Shutdown ends the watch while it looks or waits, never during a rerun: a rerun is a
        // tick like any other, which shutdown waits for (its grace, then its cancel period),
        // so that its end is recorded before `Scheduler::shutdown` returns.
        loop {
            if status.watch.retired() {
                return;
            }
            let looked = tokio::select! {
                () = runtime.shutdown.cancelled() => return,
                looked = look(provider.as_ref(), lock.name(), &mut follow) => looked,
            };
            let next = match looked {
                Ok(next) => {
                    failures = 0;
                    next
                }
                Err(error) => {
                    failures = failures.saturating_add(1);
                    tracing::debug!(job = %self.name, %error, "cannot read the run to follow");
                    Next::Wait(Duration::from_millis(250) * failures.min(40))
                }
            };
            match next {
                Next::Done => return,
                Next::Wait(wait) => tokio::select! {
                    () = runtime.shutdown.cancelled() => return,
                    () = wait_or_hint(wait, &mut hints, lock.name()) => {}
                },
                Next::Rerun(record) => {
                    let due = Due {
                        at: Instant::now(),
                        fire: record.tick.unwrap_or_else(|| runtime.clock.now()),
                        allowance: Duration::ZERO,
                        rerun: Some(Arc::new(record)),
                        catch_up: None,
                        claim: None,
                        claimed: None,
                    };
                    // Whatever it finds, the next look decides: the rerun's own record, or
                    // another instance's rerun to follow.
                    let cancel = tokio_util::sync::CancellationToken::new();
                    self.tick(state.clone(), runtime, status, due, &cancel)
                        .await;
                }
            }
        }
    }

    /// Whether the job runs its interrupted ticks again.
    pub(super) fn reruns(&self) -> bool {
        self.lock
            .as_ref()
            .is_some_and(|lock| lock.on_interrupted == super::OnInterrupted::Rerun)
    }
}

/// Reads the lock's newest records and the lock itself, and decides.
async fn look(provider: &dyn LockProvider, name: &str, follow: &mut Follow) -> Result<Next, Error> {
    let (Some(log), Some(inspector)) = (provider.run_log(), provider.inspector()) else {
        return Ok(Next::Done);
    };
    let records = log.runs(&RunQuery::lock(name).limit(LOOK_BACK)).await?;
    let lock = inspector.lock_record(name).await?;
    let now = match &lock {
        Some(lock) => lock.read_at,
        None => inspector.store_time().await?,
    };
    Ok(decide(follow, &records, lock.as_ref(), now))
}

/// `now` is the store's time when the lock was read: a run whose heartbeat
/// ([`RunRecord::alive_until`]) has not passed then still runs, lock or no lock.
fn decide(
    follow: &mut Follow,
    records: &[RunRecord],
    lock: Option<&LockRecord>,
    now: SystemTime,
) -> Next {
    let held = lock.filter(|lock| lock.held);
    let wait = || {
        Next::Wait(
            held.map_or(MIN_WAIT, LockRecord::remaining)
                .clamp(MIN_WAIT, MAX_WAIT),
        )
    };
    loop {
        match *follow {
            Follow::Holder => match held {
                Some(lock) => *follow = Follow::Token(lock.fencing_token),
                None => return Next::Done,
            },
            Follow::Newest => match records.first() {
                Some(newest) if !finished(newest) => *follow = Follow::Tick(newest.tick),
                _ => return Next::Done,
            },
            Follow::Token(token) => {
                match records.iter().find(|record| record.fencing_token == token) {
                    Some(record) => *follow = Follow::Tick(record.tick),
                    // Not recorded yet (its start is being written), or never: nothing known
                    // ran, so nothing is rerun.
                    None if held.is_some_and(|lock| lock.fencing_token == token) => {
                        return wait();
                    }
                    None => return Next::Done,
                }
            }
            Follow::Tick(tick) => {
                let Some(latest) = latest_of_tick(records, tick) else {
                    return Next::Done;
                };
                if finished(latest) {
                    return Next::Done;
                }
                return match held {
                    Some(lock) if lock.fencing_token == latest.fencing_token => wait(),
                    // Someone else holds the lock: a later tick (the interrupted one is then
                    // superseded), or a rerun whose record is not written yet.
                    Some(lock) => {
                        let later = records.iter().any(|record| {
                            record.fencing_token == lock.fencing_token && record.tick != tick
                        });
                        if later { Next::Done } else { wait() }
                    }
                    // The lock is free, but its instance still runs it (past
                    // `lock_at_most_for`, or its lock's heartbeats failed): wait for its end
                    // or its heartbeat to pass.
                    None if latest.is_alive(now) => Next::Wait(
                        latest
                            .alive_until
                            .and_then(|until| until.duration_since(now).ok())
                            .unwrap_or(MIN_WAIT)
                            .clamp(MIN_WAIT, MAX_WAIT),
                    ),
                    None => Next::Rerun(latest.clone()),
                };
            }
        }
    }
}

/// Whether a run needs nobody's help any more. A `Retried` attempt whose successor was never
/// recorded was cut short in its backoff: unfinished.
fn finished(record: &RunRecord) -> bool {
    !matches!(record.outcome, RunOutcome::Running | RunOutcome::Retried)
}

/// Sleeps `wait`, or less when the store says the lock `name` was released.
async fn wait_or_hint(
    wait: Duration,
    hints: &mut Option<tokio::sync::broadcast::Receiver<Arc<str>>>,
    name: &str,
) {
    let deadline = tokio::time::sleep(wait);
    tokio::pin!(deadline);
    loop {
        let Some(receiver) = hints.as_mut() else {
            deadline.await;
            return;
        };
        tokio::select! {
            () = &mut deadline => return,
            hint = receiver.recv() => match hint {
                Ok(released) if &*released == name => return,
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => *hints = None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RunEnd, RunStart};

    const T0: SystemTime = SystemTime::UNIX_EPOCH;

    fn record(token: u64, attempt: u32, outcome: Option<RunOutcome>) -> RunRecord {
        let tick = Some(T0 + Duration::from_secs(60));
        let start = RunStart::new("l", "j", tick, "h", token).attempt(attempt);
        let record = RunRecord::started(&start, T0);
        match outcome {
            Some(outcome) => record.finished(&RunEnd::with_error(outcome, "e"), T0),
            None => record,
        }
    }

    fn lock(token: u64, held: bool) -> LockRecord {
        let mut lock = LockRecord::new("l", "h", T0, T0 + Duration::from_secs(5), token, T0);
        lock.held = held;
        lock
    }

    #[test]
    fn a_held_run_is_waited_for_and_a_dead_one_rerun() {
        let records = [record(7, 1, None)];
        let mut follow = Follow::Holder;
        assert!(matches!(
            decide(&mut follow, &records, Some(&lock(7, true)), T0),
            Next::Wait(_)
        ));
        assert_eq!(follow, Follow::Tick(records[0].tick));
        assert!(matches!(
            decide(&mut follow, &records, Some(&lock(7, false)), T0),
            Next::Rerun(r) if r.fencing_token == 7
        ));
    }

    #[test]
    fn finished_runs_and_later_ticks_end_the_watch() {
        let done = [record(7, 1, Some(RunOutcome::Succeeded))];
        assert!(matches!(
            decide(&mut Follow::Token(7), &done, None, T0),
            Next::Done
        ));
        let mut later = record(8, 1, None);
        later.tick = Some(T0 + Duration::from_secs(120));
        let records = [later, record(7, 1, None)];
        assert!(matches!(
            decide(&mut Follow::Token(7), &records, Some(&lock(8, true)), T0),
            Next::Done
        ));
    }

    #[test]
    fn an_unrecorded_run_is_not_rerun() {
        assert!(matches!(
            decide(&mut Follow::Token(7), &[], Some(&lock(7, true)), T0),
            Next::Wait(_)
        ));
        assert!(matches!(
            decide(&mut Follow::Token(7), &[], Some(&lock(7, false)), T0),
            Next::Done
        ));
    }

    #[test]
    fn a_retry_cut_short_in_its_backoff_is_rerun() {
        let records = [record(7, 1, Some(RunOutcome::Retried))];
        assert!(matches!(
            decide(&mut Follow::Newest, &records, None, T0),
            Next::Rerun(r) if r.attempt == 1
        ));
    }

    #[test]
    fn a_run_past_its_lock_is_not_rerun_while_its_heartbeat_holds() {
        let mut alive = record(7, 1, None);
        alive.alive_until = Some(T0 + Duration::from_secs(10));
        let records = [alive];
        let mut follow = Follow::Token(7);
        let free = lock(7, false);
        let at = |secs| T0 + Duration::from_secs(secs);
        assert!(matches!(
            decide(&mut follow, &records, Some(&free), at(9)),
            Next::Wait(wait) if wait == Duration::from_secs(1)
        ));
        assert!(matches!(
            decide(&mut follow, &records, None, at(9)),
            Next::Wait(_)
        ));
        assert!(matches!(
            decide(&mut follow, &records, Some(&free), at(10)),
            Next::Rerun(r) if r.fencing_token == 7
        ));
    }
}
