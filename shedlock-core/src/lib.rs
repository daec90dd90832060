//! The core of [shedlock](https://docs.rs/shedlock): run each scheduled job on exactly one
//! instance of a fleet.
//!
//! This crate knows nothing of any particular store. It holds the lock model
//! ([`LockConfiguration`], [`LockLease`], [`Lock`]), the storage interface ([`LockProvider`]),
//! the [`LockingTaskExecutor`] that runs futures under a lock, the task-local [`LockContext`],
//! lock events ([`LockListener`]), and an [`InMemoryLockProvider`]. With the `test-util`
//! feature it also carries the provider conformance suite ([`conformance`]).
//!
//! Most users depend on the `shedlock` facade instead, which re-exports all of this.
//!
//! ```
//! use std::time::Duration;
//! use shedlock_core::{InMemoryLockProvider, LockConfiguration, LockContext, LockingTaskExecutor};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), shedlock_core::Error> {
//! let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
//! let config = LockConfiguration::new("send_newsletter", Duration::from_secs(300), Duration::from_secs(10))?;
//! let outcome = executor
//!     .execute(&config, async {
//!         let lock = LockContext::current().expect("inside a locked execution");
//!         println!("sending with fencing token {}", lock.fencing_token());
//!     })
//!     .await?;
//! assert!(outcome.was_executed());
//! # Ok(())
//! # }
//! ```

mod election;
mod error;
mod lock;
#[cfg(feature = "metrics")]
pub mod metrics;
// With the feature off: the same recording calls, empty.
#[cfg(not(feature = "metrics"))]
#[path = "metrics/off.rs"]
mod metrics;
mod runs;
mod scheduler;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

#[cfg(feature = "test-util")]
pub mod conformance;

pub use election::{
    Candidacy, ElectionConfig, Elector, LeaderElection, LeaderElectionBuilder, LeaderState,
};
pub use error::{BoxError, Error, Operation};
pub use lock::clock::{Clock, ManualClock, SystemClock, TokioClock};
pub use lock::config::LockConfiguration;
pub use lock::context::LockContext;
pub use lock::executor::{LockingTaskExecutor, TaskResult};
pub use lock::handle::Lock;
pub use lock::hints::{ReleaseHintFanOut, ReleaseHintSource};
pub use lock::holder::{MAX_HOLDER_LEN, default_holder, validate_holder};
pub use lock::listener::{LockEvent, LockListener};
pub use lock::memory::InMemoryLockProvider;
pub use lock::provider::{LockLease, LockProvider};
pub use lock::record::{LockInspector, LockQuery, LockRecord};
pub use runs::{
    DEFAULT_RUN_RETENTION, DEFAULT_RUNS_PER_LOCK, MAX_ERROR_LEN, RUN_TRIM_SLACK, RunCursor, RunEnd,
    RunLog, RunOutcome, RunQuery, RunRecord, RunStart, validate_run_retention,
};
pub use scheduler::config::SchedulerConfig;
pub use scheduler::job::{IntoJobResult, Job, JobLock};
pub use scheduler::registry::JobRegistry;
pub use scheduler::schedule::Schedule;
pub use scheduler::{
    JobOutcome, JobStatus, OnInterrupted, RunContext, Scheduler, SchedulerBuilder, ShutdownReport,
};
pub use shedlock_rules::{
    DurationError, DurationErrorKind, MAX_DURATION, MAX_LOCK_NAME_LEN, parse_duration,
    serde_duration,
};

/// The `async_trait` attribute, re-exported for implementing [`LockProvider`].
pub use async_trait::async_trait;
