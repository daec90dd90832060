//! One tick of a locked job: run it, log how it went, never unwind into tokio-cron-scheduler.

use std::any::Any;
use std::panic::AssertUnwindSafe;

use futures_util::FutureExt;
use shedlock_core::Error;
use shedlock_runtime::TaskResult;
use tracing::Instrument;

/// Awaits one locked run of `job` (acquire, run, release, as the executor does it) and logs
/// what went wrong, if anything: the job's error or panic, or the store error that kept it
/// from running this tick. Acquired, skipped and released are logged by the executor itself.
pub(crate) async fn run_tick<F>(job: &str, run: F)
where
    F: Future<Output = Result<TaskResult<Result<(), String>>, Error>>,
{
    let span = tracing::info_span!("shedlock_job", job, runner = "tokio-cron-scheduler");
    // The executor has released the lock before it resumes a panic: catching it here only
    // keeps it from ending tokio-cron-scheduler's task without a word about which job it was.
    let outcome = AssertUnwindSafe(run)
        .catch_unwind()
        .instrument(span.clone())
        .await;
    span.in_scope(|| match outcome {
        Ok(Ok(TaskResult::Executed(Ok(()))) | Ok(TaskResult::Skipped)) => {}
        Ok(Ok(TaskResult::Executed(Err(error)))) => tracing::error!(%error, "job failed"),
        Ok(Err(error)) => tracing::warn!(%error, "not executed this tick"),
        Err(panic) => tracing::error!(
            panic = panic_text(&*panic),
            "job panicked; its lock was released"
        ),
    });
}

fn panic_text(panic: &(dyn Any + Send)) -> &str {
    match panic.downcast_ref::<&str>() {
        Some(text) => text,
        None => panic
            .downcast_ref::<String>()
            .map_or("non-string panic payload", String::as_str),
    }
}
