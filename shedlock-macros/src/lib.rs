//! Attribute macros of [shedlock](https://docs.rs/shedlock): `#[scheduled]` says when an async
//! function runs, `#[scheduler_lock]` makes it run on one instance of the fleet at a time.
//!
//! Use them through the `shedlock` facade (`use shedlock::{scheduled, scheduler_lock};`), which
//! also provides what the generated code calls. Every argument is checked at compile time with
//! the functions the scheduler calls at run time (`shedlock-rules`: cron syntax, time zones,
//! durations, lock names), and a mistake is reported on the literal that holds it, in the words
//! the runtime would use.
//!
//! ```
//! use shedlock::{LockContext, scheduled, scheduler_lock};
//!
//! #[derive(Clone)]
//! struct AppState;
//!
//! #[scheduled(cron = "0 */5 * * * *")]
//! #[scheduler_lock(name = "purge_sessions", lock_at_most_for = "10m", lock_at_least_for = "30s")]
//! async fn purge_sessions(state: AppState, lock: LockContext) -> Result<(), std::io::Error> {
//!     println!("purging with fencing token {}", lock.fencing_token());
//!     Ok(())
//! }
//!
//! // at startup
//! let job: shedlock::Job<AppState> = shedlock::job!(purge_sessions);
//! assert_eq!(job.lock().map(|lock| lock.name()), Some("purge_sessions"));
//! ```
//!
//! # What is generated
//!
//! The function stays as written, callable like any `async fn`. Beside it, in the type
//! namespace, the macro adds a hidden type of the same name implementing
//! `shedlock::__private::JobFactory<State>`; `shedlock::job!(purge_sessions)` calls it to build
//! a `shedlock::Job<State>` with the function's name as the job's name, its schedule and, with
//! `#[scheduler_lock]`, its lock. Durations are emitted as `Duration::new(secs, nanos)`, so
//! nothing is parsed at run time.
//!
//! Jobs must be free functions (in a module or a block): the hidden type cannot live in an
//! `impl` block.
//!
//! Macros cannot resolve names, so the two attributes find each other by their last path
//! segment (`scheduled`, `shedlock::scheduled`, …: import them under these names), and a
//! parameter is the lock context when its type is named `LockContext`.

mod attr;
mod expand;
mod signature;
mod validate;

use proc_macro::TokenStream;

use crate::expand::Macro;

/// Runs an `async fn` on a schedule: a cron expression, a fixed rate or a fixed delay.
///
/// ```
/// use shedlock::scheduled;
/// # #[derive(Clone)] struct AppState;
/// # #[derive(Debug)] struct ReportError;
/// # impl std::fmt::Display for ReportError {
/// #     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result { f.write_str("report failed") }
/// # }
///
/// #[scheduled(cron = "0 30 2 * * *", zone = "Europe/Berlin")] // 02:30:00 Berlin time
/// async fn nightly_report(state: AppState) -> Result<(), ReportError> {
///     Ok(())
/// }
///
/// #[scheduled(fixed_rate = "30s", initial_delay = "5s")]
/// async fn poll_queue(state: AppState) {}
///
/// #[scheduled(fixed_delay = "PT1M", leader = "batch")] // only on the elected leader
/// async fn rebalance() {}
///
/// let job: shedlock::Job<AppState> = shedlock::job!(nightly_report);
/// assert_eq!(job.schedule().to_string(), "cron \"0 30 2 * * *\" in Europe/Berlin");
/// let job: shedlock::Job<AppState> = shedlock::job!(poll_queue);
/// assert_eq!(job.schedule().to_string(), "every 30s, first after 5s");
/// let job: shedlock::Job<AppState> = shedlock::job!(rebalance);
/// assert_eq!(job.leader(), Some("batch"));
/// ```
///
/// Alone, `#[scheduled]` runs the job on every instance. Add
/// [`#[scheduler_lock]`](macro@scheduler_lock) to run it on one instance at a time; the two
/// attributes may be written in either order.
///
/// # Arguments
///
/// Exactly one of `cron`, `fixed_rate` and `fixed_delay`:
///
/// | key | value | example |
/// |---|---|---|
/// | `cron` | 6 fields, seconds first, optional 7th field for the year; day-of-month and day-of-week must both match | `cron = "0 */5 * * * *"` |
/// | `fixed_rate` | duration from start to start (a run still going makes the next start skip) | `fixed_rate = "30s"` |
/// | `fixed_delay` | duration from the end of one run to the start of the next | `fixed_delay = "1m"` |
/// | `zone` | IANA time zone the cron expression is read in (only with `cron`; default: the scheduler's `default_zone`); daylight-saving changes are followed | `zone = "Europe/Berlin"` |
/// | `initial_delay` | wait after the scheduler starts before the first run | `initial_delay = "10s"` |
/// | `misfire_threshold` | a tick that would start later than this after its fire time (a paused process, an overloaded host) is not run but counted as missed (default: the scheduler's `misfire_threshold`, 60 s) | `misfire_threshold = "5m"` |
/// | `leader` | run only while this instance leads the named election (no lock per run; the scheduler campaigns on its provider or elector, timing from `SchedulerConfig::leader_election`; checked when each run starts, and a run still going when the leadership ends is told, or cancelled if it has no lock) | `leader = "batch"` |
/// | `catch_up` | only with `cron` and a lock: when the scheduler starts and the latest fire time passed no more than this long ago without any instance taking the lock since (the whole fleet was down), that tick runs once (`Schedule::with_catch_up`) | `catch_up = "6h"` |
/// | `crate` | path of the `shedlock` crate, when it is renamed in `Cargo.toml` or re-exported | `crate = "my_platform::shedlock"` |
///
/// Durations are written in humantime (`"10m"`, `"1h 30m"`, `"500ms"`) or ISO-8601
/// (`"PT10M"`, `"PT1H30M"`, `"PT0.5S"`, `"P1D"`), up to 100 years: the grammar of
/// [`shedlock_rules::parse_duration`], which `SchedulerConfig` (`scheduler.toml`) and the
/// `shedlock` command read too. Periods must be greater than zero.
///
/// # The function
///
/// - `async`, not generic, not a method (no `self`);
/// - parameters, in any order, each optional: the application state (any owned type the
///   scheduler clones for each run, usually a struct of `Arc`s or pools) and a
///   `shedlock::LockContext` (only with `#[scheduler_lock]`: the lock's fencing token,
///   extension and the lost-lock signal);
/// - returns `()` or any `Result<T, E>` with `E: Display`; an error is logged with the job's name;
/// - its future must be `Send` (it is spawned); otherwise the error is reported on the attribute.
///
/// Without a state parameter the job fits a registry of any state type.
#[proc_macro_attribute]
pub fn scheduled(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(Macro::Scheduled, args.into(), item.into()).into()
}

/// Runs a [`#[scheduled]`](macro@scheduled) job under a cluster-wide lock: on each tick, the
/// instance that takes the lock runs the job, the others skip it.
///
/// ```
/// use shedlock::{LockContext, scheduled, scheduler_lock};
/// # #[derive(Clone)] struct AppState;
///
/// #[scheduled(cron = "0/30 * * * * *", zone = "Europe/Berlin")]
/// #[scheduler_lock(name = "publish_news", lock_at_least_for = "1m", lock_at_most_for = "PT5M")]
/// async fn publish_news(state: AppState, lock: LockContext) -> Result<(), std::io::Error> {
///     println!("publishing with fencing token {}", lock.fencing_token());
///     Ok(())
/// }
///
/// #[scheduled(fixed_rate = "1h")]
/// #[scheduler_lock(name = "reindex", lock_at_most_for = "10m", keep_alive = true)]
/// async fn reindex(lock: LockContext) {
///     tokio::select! {
///         () = async { /* the long work */ } => {}
///         () = lock.cancelled() => {} // the lease can no longer be trusted: stop
///     }
/// }
/// # let _: shedlock::Job<AppState> = shedlock::job!(publish_news);
/// # let _: shedlock::Job<()> = shedlock::job!(reindex);
/// ```
///
/// # Arguments
///
/// | key | value | example |
/// |---|---|---|
/// | `name` | required: the lock's name, the same on every instance; 1 to 64 bytes, no control characters | `name = "publish_news"` |
/// | `lock_at_most_for` | the lease: if the holder dies, the lock frees itself after this long; greater than zero (default: the scheduler's `default_lock_at_most_for`) | `lock_at_most_for = "5m"` |
/// | `lock_at_least_for` | the lock stays taken at least this long, even when the job ends sooner, so that instances whose clocks trigger a little later skip the run; at most `lock_at_most_for` (default: `default_lock_at_least_for`) | `lock_at_least_for = "30s"` |
/// | `keep_alive` | extend the lease while the job runs, for jobs that may outlast `lock_at_most_for` (default: the scheduler's `keep_alive`) | `keep_alive = true` |
/// | `retries` | run a run that returned an error again, up to this many times, under the same lock (`JobLock::retries`; default 0) | `retries = 3` |
/// | `retry_backoff` | wait between a failed attempt and its retry (with `retries`; default 10 s) | `retry_backoff = "30s"` |
/// | `on_interrupted` | `"skip"` (default: a tick whose instance died mid-run is lost) or `"rerun"` (a surviving instance runs it again once, after the dead holder's lease; needs a store with run records) | `on_interrupted = "rerun"` |
/// | `crate` | path of the `shedlock` crate, as for `#[scheduled]` | `crate = "renamed_shedlock"` |
///
/// Durations take the same forms as in `#[scheduled]`.
///
/// A `LockContext` parameter of the function receives the held lock: its
/// `fencing_token()` (pass it to the resource you write, so a holder whose lease was taken over
/// cannot overwrite a newer one), `extend(..)`, and `cancelled()`, which fires when the lease
/// can no longer be trusted.
///
/// # Running a job by hand
///
/// The job built by `shedlock::job!` runs once, now, under its lock with
/// `Job::run_once(&executor, &config, state)`: `TaskResult::Skipped` when another instance
/// holds the lock, `TaskResult::Executed(Err(text))` when the job failed.
///
/// ```
/// # use shedlock::{LockContext, scheduled, scheduler_lock};
/// # #[derive(Clone)] struct AppState;
/// # #[scheduled(cron = "0/30 * * * * *")]
/// # #[scheduler_lock(name = "publish_news")]
/// # async fn publish_news(state: AppState, lock: LockContext) {}
/// use shedlock::{InMemoryLockProvider, LockingTaskExecutor, SchedulerConfig, TaskResult};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), shedlock::Error> {
/// let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
/// let outcome = shedlock::job!(publish_news)
///     .run_once(&executor, &SchedulerConfig::default(), AppState)
///     .await?;
/// assert_eq!(outcome, TaskResult::Executed(Ok(())));
/// # Ok(())
/// # }
/// ```
///
/// `#[scheduler_lock]` without `#[scheduled]` is an error; to run other code under a lock, use
/// `LockingTaskExecutor::execute`.
#[proc_macro_attribute]
pub fn scheduler_lock(args: TokenStream, item: TokenStream) -> TokenStream {
    expand::expand(Macro::SchedulerLock, args.into(), item.into()).into()
}
