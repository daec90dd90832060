//! One locked run as the scheduler records it: its run record (start, end), retries of a
//! failed attempt under the same lock, and the takeover of an interrupted run.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime};

use futures_util::FutureExt;

use crate::{
    Job, LockContext, LockProvider, RunEnd, RunLog, RunOutcome, RunQuery, RunRecord, RunStart,
};

/// What happens to a tick whose run was interrupted: its instance died (or stalled past its
/// lease) before the run finished.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{JobLock, OnInterrupted};
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
}

/// Runs `job` under the lock the caller holds (it is polled inside the executor's scope),
/// recording every attempt in the provider's run log when it has one. Failed attempts are
/// retried after the backoff while retries remain and nobody asked the run to stop. For a
/// rerun, `skipped` is set (and nothing runs) when the interrupted run is no longer the tick's
/// latest unfinished attempt (another instance took it over, or it finished after all).
pub(crate) async fn run_recorded<S: Clone + Send + 'static>(
    job: Job<S>,
    state: S,
    provider: Arc<dyn LockProvider>,
    plan: RunPlan,
    skipped: Arc<AtomicBool>,
) -> Result<(), String> {
    let context = LockContext::current().ok();
    let log = provider.run_log();
    let start = context.as_ref().map(|context| {
        RunStart::new(
            context.name(),
            plan.job.as_ref(),
            plan.tick,
            context.holder(),
            context.fencing_token(),
        )
    });
    let mut attempt = 1;
    if let Some(interrupted) = &plan.rerun {
        let (Some(log), Some(start)) = (log, &start) else {
            skipped.store(true, Ordering::Release);
            return Ok(());
        };
        if !take_over(log, interrupted, start).await {
            skipped.store(true, Ordering::Release);
            return Ok(());
        }
        attempt = interrupted.attempt.saturating_add(1);
    }
    loop {
        let start = start.clone().map(|start| start.attempt(attempt));
        if let (Some(log), Some(start)) = (log, &start)
            && let Err(error) = log.run_started(start).await
        {
            tracing::warn!(job = %plan.job, %error, "run record not written (start)");
        }
        let outcome = AssertUnwindSafe(job.start_lazily(state.clone()))
            .catch_unwind()
            .await;
        let retry = attempt <= plan.retries
            && context
                .as_ref()
                .is_none_or(|context| !context.is_cancelled() && !context.is_lost());
        let end = match &outcome {
            Ok(Ok(())) => RunEnd::succeeded(),
            Ok(Err(error)) if retry => RunEnd::with_error(RunOutcome::Retried, error.clone()),
            Ok(Err(error)) => RunEnd::with_error(RunOutcome::Failed, error.clone()),
            Err(panic) => RunEnd::with_error(
                RunOutcome::Failed,
                format!("panicked: {}", panic_text(panic.as_ref())),
            ),
        };
        if let (Some(log), Some(start)) = (log, &start)
            && let Err(error) = log.run_finished(start, &end).await
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
                if !backoff(context.as_ref(), plan.backoff).await {
                    return Err(error);
                }
                attempt += 1;
            }
            Ok(result) => return result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
}

/// Waits out the backoff; false when the run was asked to stop or lost its lease meanwhile.
async fn backoff(context: Option<&LockContext>, wait: Duration) -> bool {
    match context {
        Some(context) => {
            tokio::select! {
                () = context.cancelled() => false,
                () = tokio::time::sleep(wait) => !context.is_cancelled() && !context.is_lost(),
            }
        }
        None => {
            tokio::time::sleep(wait).await;
            true
        }
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
    let still = latest.is_some_and(|latest| {
        latest.fencing_token == interrupted.fencing_token
            && latest.attempt == interrupted.attempt
            && matches!(latest.outcome, RunOutcome::Running | RunOutcome::Retried)
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
