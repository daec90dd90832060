//! Turning shedlock jobs and plain closures into `tokio_cron_scheduler::Job`s.

use std::sync::Arc;

use chrono_tz::Tz;
use shedlock_core::{Error, LockConfiguration};
use shedlock_runtime::{IntoJobResult, Job, LockingTaskExecutor, Schedule, SchedulerConfig};

use crate::tick::run_tick;

/// Turns a shedlock [`Job`] (from `shedlock::job!(my_fn)` or [`Job::new`]) into a
/// `tokio_cron_scheduler::Job` that runs each tick under the job's lock.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::InMemoryLockProvider;
/// use shedlock_runtime::{Job, JobLock, LockingTaskExecutor, Schedule, SchedulerConfig};
/// use shedlock_tokio_cron::IntoTokioCronJob;
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// #[derive(Clone)]
/// struct AppState;
///
/// let purge = Job::new("purge", Schedule::cron("0 */5 * * * *")?, |_: AppState| async {
///     Ok::<(), std::io::Error>(())
/// })
/// .with_lock(JobLock::new("purge")?.keep_alive(true));
///
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
/// let scheduler = tokio_cron_scheduler::JobScheduler::new().await?;
/// scheduler
///     .add(purge.into_tokio_cron_job(&executor, &SchedulerConfig::default(), AppState)?)
///     .await?;
/// scheduler.start().await?;
/// # Ok(())
/// # }
/// ```
pub trait IntoTokioCronJob<S> {
    /// A tokio-cron-scheduler job firing on this job's cron schedule (in its zone, else
    /// `config.default_zone`). Each tick runs [`Job::run_latest_tick`]: acquire the lock, run with
    /// `state` (cloned per tick), keep the lease alive if the job or `config` says so, release
    /// honouring `lock_at_least_for`; a tick that another instance already ran (it fired there
    /// earlier) is skipped. From `config` come the lock durations the job leaves
    /// unset, keep-alive and `default_zone`; the holder is the executor's provider's. Its other
    /// fields (`misfire_threshold`, shutdown periods, elections, `enabled`) concern shedlock's
    /// own `Scheduler` only.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an invalid `config`, and for a job this runner cannot run
    /// as declared: without a lock (`lock`), leader-only (`leader`; tokio-cron-scheduler runs no
    /// elections), on a fixed-rate or fixed-delay schedule (`schedule`), with an initial delay
    /// (`initial_delay`) or a misfire threshold of its own (`misfire_threshold`).
    fn into_tokio_cron_job(
        self,
        executor: &LockingTaskExecutor,
        config: &SchedulerConfig,
        state: S,
    ) -> Result<tokio_cron_scheduler::Job, Error>;
}

impl<S: Clone + Send + Sync + 'static> IntoTokioCronJob<S> for Job<S> {
    fn into_tokio_cron_job(
        self,
        executor: &LockingTaskExecutor,
        config: &SchedulerConfig,
        state: S,
    ) -> Result<tokio_cron_scheduler::Job, Error> {
        config.validate()?;
        self.validate(config)?;
        let name = self.name();
        if self.lock().is_none() {
            return Err(Error::invalid_config(
                "lock",
                format!(
                    "job `{name}` has no lock; add one, or add it to tokio-cron-scheduler unlocked"
                ),
            ));
        }
        if let Some(election) = self.leader() {
            return Err(Error::invalid_config(
                "leader",
                format!(
                    "job `{name}` follows election `{election}`, which only shedlock's Scheduler runs"
                ),
            ));
        }
        let schedule = self.schedule();
        let Some(cron) = schedule.cron_expression() else {
            return Err(Error::invalid_config(
                "schedule",
                format!(
                    "job `{name}` runs {schedule}; only cron schedules convert to tokio-cron-scheduler jobs"
                ),
            ));
        };
        if !schedule.initial_delay().is_zero() {
            return Err(Error::invalid_config(
                "initial_delay",
                format!("job `{name}`: tokio-cron-scheduler has no initial delay for cron jobs"),
            ));
        }
        if schedule.misfire_threshold().is_some() {
            return Err(Error::invalid_config(
                "misfire_threshold",
                format!(
                    "job `{name}`: tokio-cron-scheduler runs late ticks whatever their lateness"
                ),
            ));
        }
        let zone = match schedule.zone() {
            Some(zone) => zone,
            None => config
                .default_zone
                .parse()
                .map_err(|_| Error::invalid_config("default_zone", "not an IANA time zone"))?,
        };
        let cron = cron.to_owned();
        let (job, executor, config) = (Arc::new(self), executor.clone(), Arc::new(config.clone()));
        cron_job(&cron, zone, move || {
            let (job, executor, config, state) = (
                Arc::clone(&job),
                executor.clone(),
                Arc::clone(&config),
                state.clone(),
            );
            async move {
                let run = job.run_latest_tick(&executor, &config, state);
                run_tick(job.name(), run).await
            }
        })
    }
}

/// A tokio-cron-scheduler job that runs `task` under `lock` on every tick of `cron` (UTC), the
/// way [`LockingTaskExecutor::execute`] runs a future: one instance at a time, `Skipped` while
/// the lock is held elsewhere, including by this instance's previous run that is still going,
/// and `Skipped` when another instance already ran this tick (see
/// [`Schedule::latest_tick`] and [`Schedule::latest_tick_since`]).
///
/// `cron` is what tokio-cron-scheduler's `Job::new_async` accepts: 6 fields, seconds first
/// (`"0 */5 * * * *"`), an optional 7th for the year. Inside `task`,
/// [`LockContext::current`](shedlock_runtime::LockContext::current) gives the fencing token, the
/// lost-lock signal and `extend`. `task`'s error or panic is logged with the lock's name.
/// For keep-alive or a time zone, describe the work as a [`Job`] and use
/// [`IntoTokioCronJob`].
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{InMemoryLockProvider, LockConfiguration};
/// use shedlock_runtime::{LockContext, LockingTaskExecutor};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
/// let lock = LockConfiguration::new("send_reports", Duration::from_secs(300), Duration::from_secs(30))?;
/// let job = shedlock_tokio_cron::locked_job("0 */5 * * * *", &executor, lock, || async {
///     let lock = LockContext::current()?;
///     println!("sending reports, fencing token {}", lock.fencing_token());
///     Ok::<(), shedlock_core::Error>(())
/// })?;
/// let scheduler = tokio_cron_scheduler::JobScheduler::new().await?;
/// scheduler.add(job).await?;
/// scheduler.start().await?;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
/// [`Error::InvalidConfig`] (`cron`) when tokio-cron-scheduler rejects `cron`.
pub fn locked_job<F, Fut>(
    cron: &str,
    executor: &LockingTaskExecutor,
    lock: LockConfiguration,
    task: F,
) -> Result<tokio_cron_scheduler::Job, Error>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output: IntoJobResult> + Send + 'static,
{
    // The same parser settings as tokio-cron-scheduler's: what it accepts, this reads alike.
    let schedule = Schedule::cron(cron).ok();
    let (executor, lock, task) = (executor.clone(), Arc::new(lock), Arc::new(task));
    cron_job(cron, Tz::UTC, move || {
        let (executor, task) = (executor.clone(), Arc::clone(&task));
        // This tick's run is refused where another instance already ran it: the store grants
        // the tick once, and refuses it where the lock was taken since it was due.
        let mut lock = (*lock).clone();
        if let Some(tick) = schedule.as_ref().and_then(|s| s.latest_tick(Tz::UTC)) {
            lock = lock.for_tick(tick);
        }
        if let Some(since) = schedule.as_ref().and_then(|s| s.latest_tick_since(Tz::UTC)) {
            lock = lock.unless_acquired_since(since);
        }
        async move {
            let run = async move { task().await.into_job_result() };
            run_tick(lock.name(), executor.execute(&lock, run)).await
        }
    })
}

/// A tokio-cron-scheduler cron job in `zone` whose every tick awaits `tick()`.
fn cron_job<F, Fut>(cron: &str, zone: Tz, tick: F) -> Result<tokio_cron_scheduler::Job, Error>
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio_cron_scheduler::Job::new_async_tz(cron, zone, move |_id, _scheduler| Box::pin(tick()))
        .map_err(|rejected| {
            // tokio-cron-scheduler decides, but its error says only `ParseSchedule`; our parser
            // has the same settings as its `new_async*` and says what is wrong.
            Schedule::cron(cron).err().unwrap_or_else(|| {
                Error::invalid_config(
                    "cron",
                    format!("{cron:?}: rejected by tokio-cron-scheduler ({rejected})"),
                )
            })
        })
}
