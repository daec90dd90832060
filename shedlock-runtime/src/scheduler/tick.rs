//! One tick of one job: is it still on time, does this instance lead, then the run itself,
//! spawned as its own task so a panic is caught and shutdown can abort it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::plan::{Launch, Unless};
use super::recovery::Follow;
use super::run::panic_text;
use super::runtime::{Due, PreparedJob, Runtime, shutdown_gate};
use super::status::{JobOutcome, JobState};
use crate::lock::executor::StartGate;
use crate::{Error, LockContext, TaskResult};

type Joined = Result<Result<TaskResult<Result<(), String>>, Error>, tokio::task::JoinError>;

impl<S: Clone + Send + Sync + 'static> PreparedJob<S> {
    /// One tick: skipped when too late or not leading, otherwise run and recorded. Nothing
    /// starts once shutdown has begun: checked here, and again right before the job starts
    /// (after its lock is taken), with leadership.
    ///
    /// A tick skipped because another instance holds the lock starts a watcher of that run
    /// when the job reruns interrupted runs.
    ///
    /// `cancel` is cancelled when the job is removed with `RemoveMode::Cancel`: a run not
    /// started yet does not start, a running one is dropped (recorded as interrupted, its
    /// lock released).
    pub(super) async fn tick(
        &self,
        state: S,
        runtime: &Arc<Runtime>,
        status: &Arc<JobState>,
        due: Due,
        cancel: &CancellationToken,
    ) {
        // A tick claimed with others had its checks made before the claim (its lock, if
        // granted, is released by the start gate's refusal).
        if due.claimed.is_none() && (cancel.is_cancelled() || !self.may_fire(runtime, status, &due))
        {
            return;
        }
        let span = tracing::info_span!(
            "shedlock_job",
            job = %self.name,
            lock = self.lock.as_ref().map(|lock| lock.config.name()),
            token = tracing::field::Empty,
            outcome = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        let started = Instant::now();
        let context: Arc<Mutex<Option<LockContext>>> = Arc::default();
        // Leader-only jobs are asked to stop when the leadership ends, as at shutdown.
        let stop = match &self.leader {
            Some(_) => runtime.stop.child_token(),
            None => runtime.stop.clone(),
        };
        let skipped = Arc::new(AtomicBool::new(false));
        let rerun = due.rerun.is_some();
        let mut handle = self.spawn_run(
            state.clone(),
            runtime,
            (&span, &context, &stop, cancel),
            due,
            &skipped,
        );
        status.set_running(&self.name, true);
        let (joined, leadership_lost) = self.join(&mut handle, runtime, &stop, cancel).await;
        status.set_running(&self.name, false);

        let outcome = match joined {
            // Refused by the start gate (the executor returns no other `Scheduler` error).
            Ok(Err(Error::Scheduler(reason))) => {
                span.in_scope(|| tracing::debug!(%reason, "not started"));
                if runtime.shutdown.is_cancelled() || cancel.is_cancelled() {
                    return;
                }
                JobOutcome::NotLeader
            }
            Ok(Ok(TaskResult::Executed(Ok(())))) if leadership_lost => JobOutcome::LeadershipLost,
            Ok(Ok(TaskResult::Executed(Ok(())))) => JobOutcome::Executed {
                duration: started.elapsed(),
            },
            // Dropped by `run_recorded`, which said why.
            Ok(Ok(TaskResult::Executed(Err(_)))) if cancel.is_cancelled() => JobOutcome::Aborted,
            Ok(Ok(TaskResult::Executed(Err(error)))) => {
                span.in_scope(|| tracing::error!(error = %error, "job failed"));
                JobOutcome::Failed(error)
            }
            Ok(Ok(TaskResult::Skipped)) => JobOutcome::Skipped,
            Ok(Err(error)) => {
                span.in_scope(
                    || tracing::warn!(error = %error, "not executed this tick: lock store failed"),
                );
                JobOutcome::StoreError(error.to_string())
            }
            Err(join) if join.is_panic() => {
                let message = panic_text(join.into_panic().as_ref());
                span.in_scope(
                    || tracing::error!(panic = %message, "job panicked; its lock was released"),
                );
                JobOutcome::Panicked(message)
            }
            Err(_aborted) => {
                let context = context.lock().unwrap_or_else(|e| e.into_inner()).take();
                if let Some(context) = context {
                    // The dropped task also releases in the background; whichever comes
                    // first does it, and this waits until it is done.
                    let _ = context.active.release().await;
                }
                if cancel.is_cancelled() {
                    span.in_scope(|| tracing::warn!("job cancelled: it was removed"));
                    JobOutcome::Aborted
                } else if leadership_lost {
                    span.in_scope(|| {
                        tracing::warn!("leader-only job cancelled: the leadership ended")
                    });
                    JobOutcome::LeadershipLost
                } else {
                    span.in_scope(|| {
                        tracing::warn!("job aborted at shutdown: it ignored the stop signal")
                    });
                    JobOutcome::Aborted
                }
            }
        };
        let outcome = match outcome {
            // A rerun found the interrupted run already taken over or finished.
            JobOutcome::Executed { .. } if skipped.load(Ordering::Acquire) => JobOutcome::Skipped,
            JobOutcome::Skipped if !rerun => {
                self.watch(state, runtime, status, Follow::Holder);
                JobOutcome::Skipped
            }
            outcome => outcome,
        };
        span.record("outcome", tracing::field::debug(&outcome));
        span.record("duration_ms", started.elapsed().as_millis() as u64);
        if runtime.shutdown.is_cancelled() {
            let counter = match outcome {
                JobOutcome::Aborted => &runtime.counters.aborted,
                _ if runtime.stop.is_cancelled() => &runtime.counters.cancelled,
                _ => &runtime.counters.finished,
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
        status.record(&self.name, outcome);
    }

    /// Whether a tick due `due` may still start: not after shutdown began, nor too late (a
    /// pause, an overload: recorded as missed), nor for a leader-only job while this instance
    /// does not lead (recorded).
    pub(super) fn may_fire(&self, runtime: &Runtime, status: &JobState, due: &Due) -> bool {
        if runtime.shutdown.is_cancelled() {
            return false;
        }
        if runtime.paused.contains(&self.name) {
            tracing::debug!(job = %self.name, "paused across the fleet, skipped");
            status.record(&self.name, JobOutcome::Paused);
            return false;
        }
        let late = Instant::now().saturating_duration_since(due.at);
        let misfire_threshold = self.misfire_threshold(runtime);
        if late > misfire_threshold && due.catch_up.is_none() && due.rerun.is_none() {
            tracing::warn!(
                job = %self.name,
                fire = %humantime::format_rfc3339_millis(due.fire),
                late = %humantime::format_duration(round_to_millis(late)),
                misfire_threshold = %humantime::format_duration(misfire_threshold),
                "tick missed: it would start too late after its fire time (paused or overloaded?)"
            );
            status.record(&self.name, JobOutcome::Missed { late });
            return false;
        }
        // Decided now, from the leadership's own deadline: not from what the election task
        // last reported, which a pause can leave stale.
        if let Some(election) = &self.leader
            && !election.is_leader()
        {
            tracing::debug!(job = %self.name, election = election.name(), "not the leader, skipped");
            status.record(&self.name, JobOutcome::NotLeader);
            return false;
        }
        true
    }

    /// The launch of a tick's run under the job's lock, but for what the run itself passes
    /// (its span, its stop signal, its start gate).
    pub(super) fn tick_launch(due: &mut Due) -> Launch {
        Launch {
            tick: due
                .rerun
                .as_ref()
                .map_or(Some(due.fire), |record| record.tick),
            // A catch-up has its own window; a rerun follows a holder that took the lock since
            // the tick: no window; a tick on time acts as if it had asked when it was due.
            unless: match (due.catch_up, &due.rerun) {
                (Some(window), _) => Unless::AcquiredWithin(window),
                (None, Some(_)) => Unless::Never,
                (None, None) => {
                    Unless::AcquiredSince(due.at.checked_sub(due.allowance).unwrap_or(due.at))
                }
            },
            // A rerun runs a tick already granted (to its dead holder) once more.
            claim: due.claim.filter(|_| due.rerun.is_none()),
            claimed: due.claimed.take(),
            rerun: due.rerun.clone(),
            heartbeat: true,
            ..Launch::default()
        }
    }

    /// Spawns the run: under the job's lock (with its heartbeat lease, run record and
    /// retries) or, for a job without one, plainly. `skipped` is set by a rerun that finds
    /// nothing left to do.
    fn spawn_run(
        &self,
        state: S,
        runtime: &Runtime,
        (span, context, stop, cancel): (
            &tracing::Span,
            &Arc<Mutex<Option<LockContext>>>,
            &CancellationToken,
            &CancellationToken,
        ),
        due: Due,
        skipped: &Arc<AtomicBool>,
    ) -> JoinHandle<Result<TaskResult<Result<(), String>>, Error>> {
        let may_start = self.start_gate(runtime, cancel);
        match (&self.lock, &runtime.executor) {
            (Some(lock), Some(executor)) => {
                let (slot, token_span) = (Arc::clone(context), span.clone());
                let mut due = due;
                let launch = Launch {
                    stop: Some(stop.clone()),
                    cancel: Some(cancel.clone()),
                    on_start: Some(Box::new(move |ctx: LockContext| {
                        token_span.record("token", ctx.fencing_token());
                        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(ctx);
                    })),
                    may_start: Some(may_start),
                    skipped: Some(Arc::clone(skipped)),
                    ..Self::tick_launch(&mut due)
                };
                let (name, run) = (Arc::clone(&self.name), Arc::clone(&self.run));
                let run = lock.run(name, run, state, executor.clone(), launch);
                tokio::spawn(run.instrument(span.clone()))
            }
            _ => {
                let run = self.start_lazily(state);
                tokio::spawn(
                    async move {
                        may_start()?;
                        Ok(TaskResult::Executed(run.await))
                    }
                    .instrument(span.clone()),
                )
            }
        }
    }

    /// Decides, right before the job starts, that it still may: no shutdown begun, and for a
    /// leader-only job, this instance still leads (the lock's acquisition takes a round trip,
    /// and the spawned run starts a little after the tick's own checks); the job was not
    /// removed with `RemoveMode::Cancel`.
    fn start_gate(&self, runtime: &Runtime, cancel: &CancellationToken) -> StartGate {
        let not_shutting_down = shutdown_gate(runtime, &self.name);
        let (leader, job) = (self.leader.clone(), Arc::clone(&self.name));
        let cancel = cancel.clone();
        Box::new(move || {
            not_shutting_down()?;
            if cancel.is_cancelled() {
                return Err(Error::Scheduler(format!(
                    "job `{job}` was not started: it was removed"
                )));
            }
            match &leader {
                Some(election) if !election.is_leader() => Err(Error::Scheduler(format!(
                    "job `{job}` was not started: this instance no longer leads `{}`",
                    election.name()
                ))),
                _ => Ok(()),
            }
        })
    }

    /// Waits for the run, aborting it at shutdown's last phase, or when the job is removed with
    /// `RemoveMode::Cancel` and has no lock (a locked run drops itself, to record why). When a
    /// leader-only job's leadership ends first, a locked run is asked to stop (its lock
    /// context's `cancelled()` fires) and awaited; a run without a lock has no other way to
    /// learn it and is cancelled. Returns the run's result and whether the leadership ended
    /// while it ran.
    async fn join(
        &self,
        handle: &mut JoinHandle<Result<TaskResult<Result<(), String>>, Error>>,
        runtime: &Runtime,
        stop: &CancellationToken,
        cancel: &CancellationToken,
    ) -> (Joined, bool) {
        let removed = async {
            match &self.lock {
                None => cancel.cancelled().await,
                Some(_) => std::future::pending().await,
            }
        };
        tokio::pin!(removed);
        let term_ended = async {
            match &self.leader {
                Some(election) => election.candidacy().term_ended().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            joined = &mut *handle => return (joined, false),
            () = runtime.abort.cancelled() => {
                handle.abort();
                return (handle.await, false);
            }
            () = &mut removed => {
                handle.abort();
                return (handle.await, false);
            }
            () = term_ended => {}
        }
        stop.cancel();
        if self.lock.is_none() {
            handle.abort();
        }
        tokio::select! {
            joined = &mut *handle => (joined, true),
            () = &mut removed => {
                handle.abort();
                (handle.await, true)
            }
            () = runtime.abort.cancelled() => {
                handle.abort();
                (handle.await, true)
            }
        }
    }
}

fn round_to_millis(duration: Duration) -> Duration {
    Duration::from_millis(u64::try_from(duration.as_millis()).unwrap_or(u64::MAX))
}
