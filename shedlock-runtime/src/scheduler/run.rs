//! One locked run as the scheduler records it: its run record (start, end), retries of a
//! failed attempt under the same lock, and the takeover of an interrupted run.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use futures_util::FutureExt;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::job::{RunFn, start_lazily};
use crate::{LockContext, RunEnd, RunLog, RunOutcome, RunQuery, RunRecord, RunStart};

/// What happens to a tick whose run was interrupted: its instance died (or stalled past its
/// lease) before the run finished.
///
/// ```
/// use std::time::Duration;
/// use shedlock_runtime::{JobLock, OnInterrupted};
///
/// let lock = JobLock::new("nightly-report")?.on_interrupted(OnInterrupted::Rerun);
/// # Ok::<(), shedlock_core::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OnInterrupted {
    /// The tick is lost; the next tick runs as usual (ShedLock's behaviour).
    #[default]
    Skip,
    /// A surviving instance runs the tick again, once, as soon as the dead holder's lease is
    /// gone (never while it could still run: the rerun holds a newer fencing token). Needs a
    /// store that keeps run records.
    Rerun,
}

/// The scheduled run in progress, as seen from inside the job: which tick it belongs to and
/// which attempt it is (a retry, or the rerun of an interrupted run, counts up). A job that
/// reruns interrupted ticks or catches up missed ones reads the tick here to do that tick's
/// work (e.g. the report for 02:00), not the current time's.
///
/// ```
/// use shedlock_runtime::RunContext;
///
/// async fn nightly_report() {
///     if let Some(run) = RunContext::current() {
///         println!("tick {:?}, attempt {}", run.tick(), run.attempt());
///     }
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunContext {
    job: Arc<str>,
    tick: Option<SystemTime>,
    attempt: u32,
}

tokio::task_local! {
    static CURRENT_RUN: RunContext;
}

impl RunContext {
    /// The run of a locked scheduled job this code runs in; `None` elsewhere (outside the
    /// scheduler, in a job without a lock, in a task the job spawned).
    pub fn current() -> Option<RunContext> {
        CURRENT_RUN.try_with(Clone::clone).ok()
    }

    /// The job's name.
    pub fn job(&self) -> &str {
        &self.job
    }

    /// The fire time the run belongs to (for a rerun or a catch-up, the original tick's).
    pub fn tick(&self) -> Option<SystemTime> {
        self.tick
    }

    /// 1 for the first attempt; retries and reruns count up.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

/// How one locked run goes: which tick, which attempt first, how many retries.
#[derive(Debug, Clone)]
pub(crate) struct RunPlan {
    pub(crate) job: Arc<str>,
    pub(crate) tick: Option<SystemTime>,
    /// Attempts after the first for a run that returns an error, and the wait between them.
    pub(crate) retries: u32,
    pub(crate) backoff: Duration,
    /// The interrupted run this one takes over, if any: checked again under the lock.
    pub(crate) rerun: Option<Arc<RunRecord>>,
    /// The run's heartbeat lease ([`run_heartbeat`]), for a job whose interrupted ticks are
    /// rerun: renewed in its record while the job runs, the job stopped before it passes.
    pub(crate) alive_for: Option<Duration>,
    /// Cancelled when the job is removed from its scheduler with `RemoveMode::Cancel`: the
    /// attempt is dropped and recorded as interrupted.
    pub(crate) cancel: Option<CancellationToken>,
}

/// The run heartbeat of a job whose interrupted ticks are rerun: the scheduler's `run_lease`,
/// or `lock_at_most_for` when heartbeat leases are off. It is what tells another instance
/// that the run goes on (so it is not rerun) after the lock's own lease ended: a job that
/// runs past `lock_at_most_for`, or whose lock heartbeats failed while the store was away.
pub(crate) fn run_heartbeat(
    on_interrupted: OnInterrupted,
    run_lease: Duration,
    lock_at_most_for: Duration,
) -> Option<Duration> {
    (on_interrupted == OnInterrupted::Rerun).then(|| {
        if run_lease.is_zero() {
            lock_at_most_for
        } else {
            run_lease
        }
    })
}

/// Runs `job` under the lock `context` holds (the caller polls it inside the executor's
/// scope), recording every attempt in the run log of the store that granted the lock, when it
/// has one. Failed attempts are retried after the backoff while retries remain and nobody asked
/// the run to stop. For a rerun, `skipped` is set (and nothing runs) when the interrupted run
/// is no longer the tick's latest unfinished attempt (another instance took it over, or it
/// finished after all).
pub(crate) async fn run_recorded<S: Clone + Send + 'static>(
    job: Arc<RunFn<S>>,
    state: S,
    context: LockContext,
    plan: RunPlan,
    skipped: Option<Arc<AtomicBool>>,
) -> Result<(), String> {
    let skip = || {
        if let Some(skipped) = &skipped {
            skipped.store(true, Ordering::Release);
        }
    };
    let log = context.provider().run_log();
    let mut start = RunStart::new(
        context.name(),
        plan.job.as_ref(),
        plan.tick,
        context.holder(),
        context.fencing_token(),
    );
    let mut attempt = 1;
    if let Some(interrupted) = &plan.rerun {
        let Some(log) = log else {
            skip();
            return Ok(());
        };
        if !take_over(log, interrupted, &start).await {
            skip();
            return Ok(());
        }
        attempt = interrupted.attempt.saturating_add(1);
    }
    loop {
        // One record for the run, its attempt counted up in place (no copy per attempt).
        start = start.attempt(attempt);
        if let Some(lease) = plan.alive_for {
            start = start.alive_for(lease);
        }
        let sent = Instant::now();
        let mut recorded = false;
        if let Some(log) = log {
            match log.run_started(&start).await {
                Ok(_) => recorded = true,
                Err(error) => {
                    tracing::warn!(job = %plan.job, %error, "run record not written (start)");
                }
            }
        }
        let current = RunContext {
            job: Arc::clone(&plan.job),
            tick: plan.tick,
            attempt,
        };
        let run = CURRENT_RUN.scope(
            current,
            AssertUnwindSafe(start_lazily(&job, state.clone())).catch_unwind(),
        );
        let cancel = plan.cancel.as_ref();
        let outcome = match (log, plan.alive_for) {
            (Some(log), Some(lease)) => {
                let deadline = Arc::new(Mutex::new(stop_by(sent, lease)));
                let beat = Heartbeat {
                    log,
                    start: &start,
                    lease,
                    deadline: Arc::clone(&deadline),
                    recorded,
                };
                tokio::select! {
                    biased;
                    () = removed(cancel) => {
                        return Err(cancelled(Some(log), &start, &plan.job, recorded).await);
                    }
                    lost = beat.keep() => {
                        return Err(stopped(log, &start, &plan.job, lost).await);
                    }
                    outcome = gated(run, &deadline) => match outcome {
                        Some(outcome) => outcome,
                        None => {
                            let lost = not_renewed(lease);
                            return Err(stopped(log, &start, &plan.job, lost).await);
                        }
                    },
                }
            }
            _ => tokio::select! {
                biased;
                () = removed(cancel) => {
                    return Err(cancelled(log, &start, &plan.job, recorded).await);
                }
                outcome = run => outcome,
            },
        };
        let retry = attempt <= plan.retries && !context.is_cancelled() && !context.is_lost();
        let end = match &outcome {
            Ok(Ok(())) => RunEnd::succeeded(),
            Ok(Err(error)) if retry => RunEnd::with_error(RunOutcome::Retried, error.clone()),
            Ok(Err(error)) => RunEnd::with_error(RunOutcome::Failed, error.clone()),
            Err(panic) => RunEnd::with_error(
                RunOutcome::Failed,
                format!("panicked: {}", panic_text(panic.as_ref())),
            ),
        };
        if let Some(log) = log
            && let Err(error) = log.run_finished(&start, &end).await
        {
            tracing::warn!(job = %plan.job, %error, "run record not written (end)");
        }
        match outcome {
            Ok(Err(error)) if retry => {
                tracing::warn!(
                    job = %plan.job,
                    attempt,
                    retries = plan.retries,
                    %error,
                    "run failed; retrying under the same lock"
                );
                let waited = tokio::select! {
                    biased;
                    () = removed(plan.cancel.as_ref()) => None,
                    waited = backoff(&context, plan.backoff) => Some(waited),
                };
                attempt += 1;
                match waited {
                    Some(true) => {}
                    Some(false) => return Err(error),
                    // The retry's record, started and ended at once: the attempt that failed
                    // reads `Retried`, which alone would look cut short (and be rerun).
                    None => {
                        let next = start.attempt(attempt);
                        return Err(cancelled(log, &next, &plan.job, false).await);
                    }
                }
            }
            Ok(result) => return result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// When a run whose heartbeat was last confirmed by a renewal sent at `sent` stops: a fifth of
/// the lease before the heartbeat can pass in the store (which counts from when the renewal
/// arrived, after `sent`), so a late timer on a loaded machine still stops it first.
fn stop_by(sent: Instant, lease: Duration) -> Instant {
    sent + lease - lease / 5
}

/// The heartbeat of one running attempt: renews its record's `alive_until` every third of the
/// lease; `deadline` is when the job is stopped unless a renewal is confirmed first
/// ([`stop_by`] the last confirmed one), on this process's monotonic clock.
struct Heartbeat<'a> {
    log: &'a dyn RunLog,
    start: &'a RunStart,
    lease: Duration,
    deadline: Arc<Mutex<Instant>>,
    /// Whether the start was confirmed: a record that was never written is no record another
    /// instance could rerun, so finding none is no reason to stop.
    recorded: bool,
}

impl Heartbeat<'_> {
    /// Renews until the heartbeat is lost, then says why; never returns while it holds.
    async fn keep(self) -> String {
        let every = self.lease / 3;
        let mut next = Instant::now() + every;
        loop {
            let deadline = *lock(&self.deadline);
            tokio::time::sleep_until(next.min(deadline)).await;
            if Instant::now() >= deadline {
                return not_renewed(self.lease);
            }
            let sent = Instant::now();
            match tokio::time::timeout_at(deadline, self.log.run_alive(self.start, self.lease))
                .await
            {
                Ok(Ok(alive)) if alive || !self.recorded => {
                    *lock(&self.deadline) = stop_by(sent, self.lease);
                    next = sent + every;
                }
                Ok(Ok(_)) => {
                    return "its run record was ended, or its heartbeat had passed, in the store \
                            (another instance may run the tick again)"
                        .to_owned();
                }
                Ok(Err(error)) => {
                    tracing::debug!(lock = %self.start.lock, %error, "run heartbeat not renewed");
                    next = Instant::now() + (every / 4).max(Duration::from_millis(50));
                }
                Err(_) => {} // the deadline passed while waiting: said above
            }
        }
    }
}

fn not_renewed(lease: Duration) -> String {
    format!(
        "its run heartbeat (lease {}) could not be renewed: the store did not answer",
        humantime::format_duration(lease)
    )
}

fn lock(deadline: &Mutex<Instant>) -> std::sync::MutexGuard<'_, Instant> {
    deadline.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `run`, never polled once `deadline` has passed (then `None`): a process that was stopped
/// (SIGSTOP, a long pause) and wakes past its heartbeat does not take one more step of the job
/// before the heartbeat's own timer is seen.
async fn gated<F: Future>(run: F, deadline: &Mutex<Instant>) -> Option<F::Output> {
    let mut run = std::pin::pin!(run);
    std::future::poll_fn(|cx| {
        if Instant::now() >= *lock(deadline) {
            return std::task::Poll::Ready(None);
        }
        run.as_mut().poll(cx).map(Some)
    })
    .await
}

/// A run stopped because its heartbeat was lost: it is recorded as interrupted (unless another
/// instance marked it first, or the store is still away: then whoever reruns it does), and the
/// text returned is the run's error.
async fn stopped(log: &dyn RunLog, start: &RunStart, job: &str, lost: String) -> String {
    let error = format!("stopped: {lost}");
    tracing::warn!(%job, lock = %start.lock, token = start.fencing_token, "run {error}");
    let end = RunEnd::with_error(RunOutcome::Interrupted, error.clone());
    let give_up = Instant::now() + start.lease.unwrap_or(Duration::from_secs(5));
    if let Ok(Err(error)) = tokio::time::timeout_at(give_up, log.run_finished(start, &end)).await {
        tracing::warn!(%job, %error, "run record not written (end)");
    }
    error
}

/// Completes when `cancel` is cancelled; never without one.
async fn removed(cancel: Option<&CancellationToken>) {
    match cancel {
        Some(cancel) => cancel.cancelled().await,
        None => std::future::pending().await,
    }
}

/// An attempt cancelled because its job was removed: recorded as interrupted (its start first
/// if it was not recorded), so no instance runs the tick again; the text returned is the run's
/// error.
async fn cancelled(
    log: Option<&dyn RunLog>,
    start: &RunStart,
    job: &str,
    recorded: bool,
) -> String {
    let reason = "cancelled: the job was removed from its scheduler".to_owned();
    tracing::warn!(%job, lock = %start.lock, token = start.fencing_token, "run {reason}");
    let Some(log) = log else {
        return reason;
    };
    if !recorded && let Err(error) = log.run_started(start).await {
        tracing::warn!(%job, %error, "run record not written (start)");
        return reason;
    }
    let end = RunEnd::with_error(RunOutcome::Interrupted, reason.clone());
    if let Err(error) = log.run_finished(start, &end).await {
        tracing::warn!(%job, %error, "run record not written (end)");
    }
    reason
}

/// Waits out the backoff; false when the run was asked to stop or lost its lease meanwhile.
async fn backoff(context: &LockContext, wait: Duration) -> bool {
    tokio::select! {
        () = context.cancelled() => false,
        () = tokio::time::sleep(wait) => !context.is_cancelled() && !context.is_lost(),
    }
}

/// Under the lock, with a newer token than the interrupted run's: if that run is still the
/// latest attempt of its tick and unfinished, marks it interrupted (the first end stays, so
/// a stalled holder's late end cannot undo it) and says the tick may run again.
async fn take_over(log: &dyn RunLog, interrupted: &RunRecord, start: &RunStart) -> bool {
    let latest = match log
        .runs(&RunQuery::lock(&start.lock).limit(LOOK_BACK))
        .await
    {
        Ok(records) => latest_of_tick(&records, interrupted.tick).cloned(),
        Err(error) => {
            tracing::warn!(lock = %start.lock, %error, "run records unreadable: no rerun");
            return false;
        }
    };
    // Its heartbeat is as the watcher saw it pass (a heartbeat that passed is never renewed).
    let still = latest.is_some_and(|latest| {
        latest.fencing_token == interrupted.fencing_token
            && latest.attempt == interrupted.attempt
            && matches!(latest.outcome, RunOutcome::Running | RunOutcome::Retried)
            && latest.alive_until <= interrupted.alive_until
    });
    if !still || interrupted.fencing_token >= start.fencing_token {
        return false;
    }
    let theirs = RunStart::new(
        &interrupted.lock,
        &interrupted.job,
        interrupted.tick,
        &interrupted.holder,
        interrupted.fencing_token,
    )
    .attempt(interrupted.attempt);
    let end = RunEnd::with_error(
        RunOutcome::Interrupted,
        format!(
            "{} stopped before the run finished; run again by {} (token {})",
            interrupted.holder, start.holder, start.fencing_token
        ),
    );
    if interrupted.outcome == RunOutcome::Running
        && let Err(error) = log.run_finished(&theirs, &end).await
    {
        tracing::warn!(lock = %start.lock, %error, "interrupted run not marked: no rerun");
        return false;
    }
    tracing::warn!(
        job = %interrupted.job,
        holder = %interrupted.holder,
        token = interrupted.fencing_token,
        "running the interrupted tick again"
    );
    true
}

/// How many of a lock's newest records recovery reads.
pub(crate) const LOOK_BACK: usize = 64;

/// The newest attempt (by token, then attempt) among `records` of the tick `tick`.
pub(crate) fn latest_of_tick(
    records: &[RunRecord],
    tick: Option<SystemTime>,
) -> Option<&RunRecord> {
    records
        .iter()
        .filter(|record| record.tick == tick)
        .max_by_key(|record| (record.fencing_token, record.attempt))
}

/// The text of a panic's payload.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    match (panic.downcast_ref::<String>(), panic.downcast_ref::<&str>()) {
        (Some(message), _) => message.clone(),
        (None, Some(message)) => (*message).to_owned(),
        (None, None) => "non-string panic payload".to_owned(),
    }
}
