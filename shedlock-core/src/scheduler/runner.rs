//! One task per job: wait for the next tick, run, record. Runs never overlap within an
//! instance: a tick that comes while the previous run is still going is skipped and logged.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::status::{JobOutcome, JobState};
use crate::executor::ExecuteOptions;
use crate::schedule::ScheduleKind;
use crate::{
    Clock, Job, LeaderElection, LockConfiguration, LockContext, LockingTaskExecutor, TaskResult,
};

/// Longest single sleep while waiting for a wall-clock fire time, so a clock step (NTP,
/// suspend) is noticed within this long.
const MAX_WALL_SLEEP: Duration = Duration::from_secs(60);

/// What every job runner of one scheduler shares.
#[derive(Debug)]
pub(crate) struct Runtime {
    pub(crate) executor: Option<LockingTaskExecutor>,
    pub(crate) zone: Tz,
    pub(crate) clock: Arc<dyn Clock>,
    /// Stop firing new ticks.
    pub(crate) shutdown: CancellationToken,
    /// Ask running jobs to stop (their lock context's `cancelled()` fires).
    pub(crate) stop: CancellationToken,
    /// Abort running jobs.
    pub(crate) abort: CancellationToken,
    pub(crate) counters: ShutdownCounters,
}

/// Outcomes of the runs in progress when shutdown began.
#[derive(Debug, Default)]
pub(crate) struct ShutdownCounters {
    pub(crate) finished: AtomicUsize,
    pub(crate) cancelled: AtomicUsize,
    pub(crate) aborted: AtomicUsize,
    pub(crate) locks_released: Arc<AtomicUsize>,
}

/// A job ready to run: its lock resolved against the configuration.
pub(crate) struct PreparedJob<S> {
    pub(crate) job: Job<S>,
    pub(crate) lock: Option<LockConfiguration>,
    pub(crate) keep_alive: Option<Duration>,
    pub(crate) leader: Option<Arc<LeaderElection>>,
}

impl<S: Clone + Send + Sync + 'static> PreparedJob<S> {
    /// Runs the job's schedule until shutdown.
    pub(crate) async fn run(self, state: S, runtime: Arc<Runtime>, status: Arc<JobState>) {
        let initial_delay = self.job.schedule.initial_delay;
        if !initial_delay.is_zero() {
            status.set_next_fire(Some(runtime.clock.now() + initial_delay));
            if !sleep_or_shutdown(&runtime, Instant::now() + initial_delay).await {
                return;
            }
        }
        match self.job.schedule.kind.clone() {
            ScheduleKind::Cron { .. } => self.run_cron(state, &runtime, &status).await,
            ScheduleKind::FixedRate(period) => {
                self.run_fixed_rate(period, state, &runtime, &status).await
            }
            ScheduleKind::FixedDelay(delay) => {
                self.run_fixed_delay(delay, state, &runtime, &status).await
            }
        }
        status.set_next_fire(None);
    }

    /// Cron: each fire time is computed in the job's zone from the previous one, so
    /// daylight-saving changes are followed (the offset is never cached).
    async fn run_cron(&self, state: S, runtime: &Runtime, status: &JobState) {
        let mut after: DateTime<Utc> = runtime.clock.now().into();
        loop {
            let Some(fire) = self.job.schedule.next_cron_fire(after, runtime.zone) else {
                tracing::warn!(job = %self.job.name, "cron schedule has no further fire time");
                return;
            };
            status.set_next_fire(Some(fire.into()));
            if !sleep_until_wall(runtime, fire.into()).await {
                return;
            }
            self.tick(state.clone(), runtime, status).await;
            after = fire;
            let now: DateTime<Utc> = runtime.clock.now().into();
            let mut missed = 0u32;
            while let Some(next) = self.job.schedule.next_cron_fire(after, runtime.zone) {
                if next > now {
                    break;
                }
                missed += 1;
                after = next;
            }
            self.report_overlap(missed, status);
        }
    }

    /// Fixed rate on a grid `start + k × period`: ticks missed during a long run are skipped
    /// (and logged), and firing continues on the grid afterwards; it never stalls.
    async fn run_fixed_rate(
        &self,
        period: Duration,
        state: S,
        runtime: &Runtime,
        status: &JobState,
    ) {
        let origin = Instant::now();
        let mut tick_index: u32 = 0;
        loop {
            // Beyond about 4 billion ticks (or a grid past the clock's range) the job ends.
            let Some(due) = period
                .checked_mul(tick_index)
                .and_then(|d| origin.checked_add(d))
            else {
                tracing::warn!(job = %self.job.name, "fixed-rate schedule exhausted");
                return;
            };
            status.set_next_fire(Some(
                runtime.clock.now() + due.saturating_duration_since(Instant::now()),
            ));
            if !sleep_or_shutdown(runtime, due).await {
                return;
            }
            self.tick(state.clone(), runtime, status).await;
            let elapsed_ticks = origin.elapsed().as_nanos() / period.as_nanos();
            let next = u32::try_from(elapsed_ticks + 1)
                .unwrap_or(u32::MAX)
                .max(tick_index + 1);
            self.report_overlap(next.saturating_sub(tick_index).saturating_sub(1), status);
            tick_index = next;
        }
    }

    async fn run_fixed_delay(
        &self,
        delay: Duration,
        state: S,
        runtime: &Runtime,
        status: &JobState,
    ) {
        loop {
            status.set_next_fire(None);
            self.tick(state.clone(), runtime, status).await;
            status.set_next_fire(Some(runtime.clock.now() + delay));
            if !sleep_or_shutdown(runtime, Instant::now() + delay).await {
                return;
            }
        }
    }

    fn report_overlap(&self, missed: u32, status: &JobState) {
        if missed > 0 {
            tracing::warn!(
                job = %self.job.name,
                missed,
                "skipped ticks: the previous run of this job was still going"
            );
            status.record_overlap(missed);
        }
    }

    /// One run: spawned as its own task so a panic is caught and shutdown can abort it.
    async fn tick(&self, state: S, runtime: &Runtime, status: &JobState) {
        if let Some(election) = &self.leader
            && !election.is_leader()
        {
            tracing::debug!(job = %self.job.name, election = election.name(), "not the leader, skipped");
            status.record(JobOutcome::NotLeader);
            return;
        }
        let span = tracing::info_span!(
            "shedlock_job",
            job = %self.job.name,
            lock = self.lock.as_ref().map(LockConfiguration::name),
            token = tracing::field::Empty,
            outcome = tracing::field::Empty,
            duration_ms = tracing::field::Empty,
        );
        let started = Instant::now();
        let context: Arc<Mutex<Option<LockContext>>> = Arc::default();
        let run = (self.job.run)(state);
        let mut handle = match (&self.lock, &runtime.executor) {
            (Some(lock), Some(executor)) => {
                let (executor, lock) = (executor.clone(), lock.clone());
                let (slot, token_span) = (Arc::clone(&context), span.clone());
                let options = ExecuteOptions {
                    keep_alive: self.keep_alive,
                    stop: Some(runtime.stop.clone()),
                    on_start: Some(Box::new(move |ctx: LockContext| {
                        token_span.record("token", ctx.fencing_token());
                        *slot.lock().unwrap_or_else(|e| e.into_inner()) = Some(ctx);
                    })),
                };
                tokio::spawn(
                    async move { executor.execute_with(&lock, options, run).await }
                        .instrument(span.clone()),
                )
            }
            _ => tokio::spawn(
                async move { Ok(TaskResult::Executed(run.await)) }.instrument(span.clone()),
            ),
        };
        status.set_running(true);
        let joined = tokio::select! {
            joined = &mut handle => joined,
            () = runtime.abort.cancelled() => {
                handle.abort();
                handle.await
            }
        };
        status.set_running(false);

        let outcome = match joined {
            Ok(Ok(TaskResult::Executed(Ok(())))) => JobOutcome::Executed {
                duration: started.elapsed(),
            },
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
                let message = panic_message(join.into_panic());
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
                span.in_scope(|| {
                    tracing::warn!("job aborted at shutdown: it ignored the stop signal")
                });
                JobOutcome::Aborted
            }
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
        status.record(outcome);
    }
}

fn panic_message(panic: Box<dyn std::any::Any + Send>) -> String {
    match panic.downcast::<String>() {
        Ok(message) => *message,
        Err(panic) => panic.downcast_ref::<&str>().map_or_else(
            || "non-string panic payload".to_owned(),
            |s| (*s).to_owned(),
        ),
    }
}

/// Sleeps until `deadline`; false if shutdown came first.
async fn sleep_or_shutdown(runtime: &Runtime, deadline: Instant) -> bool {
    tokio::select! {
        () = runtime.shutdown.cancelled() => false,
        () = tokio::time::sleep_until(deadline) => true,
    }
}

/// Sleeps until the wall clock shows `fire`, in bounded steps so clock steps are noticed;
/// false if shutdown came first.
async fn sleep_until_wall(runtime: &Runtime, fire: SystemTime) -> bool {
    loop {
        let Ok(remaining) = fire.duration_since(runtime.clock.now()) else {
            return !runtime.shutdown.is_cancelled();
        };
        if remaining.is_zero() {
            return !runtime.shutdown.is_cancelled();
        }
        let step = remaining.min(MAX_WALL_SLEEP);
        if !sleep_or_shutdown(runtime, Instant::now() + step).await {
            return false;
        }
    }
}
