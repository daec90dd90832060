//! [shedlock](https://docs.rs/shedlock) for
//! [tokio-cron-scheduler](https://docs.rs/tokio-cron-scheduler/0.15): keep the `JobScheduler`
//! you have, and run each tick of a job on one instance of your fleet at a time.
//!
//! Like ShedLock in Java, this is a lock around the scheduler you already use, not a new
//! scheduler. Each tick of a job made here goes through a shedlock
//! [`LockingTaskExecutor`](shedlock_runtime::LockingTaskExecutor): acquire the lease (on database
//! time, with a fencing token), run, release honouring `lock_at_least_for`. A tick whose lock
//! is held elsewhere is skipped. A store error skips the tick with a warning; a job's error or
//! panic is logged with its name after its lock is released. Nothing here panics
//! tokio-cron-scheduler's tasks.
//!
//! Two ways in, both returning a `tokio_cron_scheduler::Job` for `JobScheduler::add`:
//!
//! - [`IntoTokioCronJob::into_tokio_cron_job`] for a shedlock [`Job`](shedlock_runtime::Job)
//!   (`shedlock::job!(my_fn)` for a `#[scheduled]` function): its cron schedule, its lock,
//!   keep-alive and the lost-lock signal, durations left unset taken from a
//!   [`SchedulerConfig`](shedlock_runtime::SchedulerConfig).
//! - [`locked_job`] for any closure returning a future, under a
//!   [`LockConfiguration`](shedlock_core::LockConfiguration).
//!
//! ```
//! use std::time::Duration;
//! use shedlock_core::{InMemoryLockProvider, LockConfiguration};
//! use shedlock_runtime::LockingTaskExecutor;
//! use tokio_cron_scheduler::JobScheduler;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // In production: a SQL provider on the database every instance shares.
//! let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
//! let scheduler = JobScheduler::new().await?;
//! let lock = LockConfiguration::new("import_orders", Duration::from_secs(600), Duration::from_secs(30))?;
//! scheduler
//!     .add(shedlock_tokio_cron::locked_job("0 */5 * * * *", &executor, lock, || async {
//!         // runs on one instance per tick
//!     })?)
//!     .await?;
//! scheduler.start().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # What tokio-cron-scheduler still does its way
//!
//! The lock decides *whether* a tick runs; tokio-cron-scheduler still decides *when*, and
//! that keeps some of its behaviour (0.15.1) that shedlock's own `Scheduler` avoids:
//!
//! - **Self-overlap** (its #83): it starts a new task on every tick, even while the previous
//!   run goes on. Here the new tick finds the lock held and is skipped, not run concurrently,
//!   as long as the lease holds: keep it alive (`keep_alive`) for jobs that may outlast
//!   `lock_at_most_for`, or a late run overlaps the next one.
//! - **Firing time**: it looks for due jobs every 500 ms, so a tick fires up to half a second
//!   late, and instances fire the same tick up to half a second apart (more under load). A
//!   short job then releases before a slower instance fires: choose `lock_at_least_for` longer
//!   than that spread and shorter than the period (for a job every minute, 5 to 30 s).
//! - **Late ticks**: a tick that fires late (a paused process, an overloaded host) runs
//!   whatever its lateness, and the lock does not know which tick a run is for: only
//!   `lock_at_least_for` stops a late instance from redoing a tick another one already ran.
//! - **Time zones** (#87, #107): a zone's UTC offset is fixed when the job is created, so a
//!   zoned job fires an hour off after a daylight-saving change until it is re-created.
//!   Jobs in UTC are not affected.
//! - **Shutdown**: `JobScheduler::shutdown` stops ticking but neither waits for nor signals
//!   running jobs; a run cut short by the process exiting keeps its lock until `lock_until`.
//! - **Panics** (#57) are handled here: logged with the job's name, lock released.
//!
//! Cron strings are parsed by tokio-cron-scheduler's `Job::new_async_tz`: 6 fields, seconds
//! first, with the same parser settings as shedlock's own cron, so a schedule means the same
//! thing on both runners.

mod job;
mod tick;

pub use job::{IntoTokioCronJob, locked_job};
