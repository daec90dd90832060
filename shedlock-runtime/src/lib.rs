//! The runtime of [shedlock](https://docs.rs/shedlock) over any store of `shedlock-core`'s
//! contract: run each scheduled job on exactly one instance of a fleet.
//!
//! It holds the [`LockingTaskExecutor`] that runs futures under a lock (keep-alive, the
//! task-local [`LockContext`], the [`Lock`] handle, lock events through [`LockListener`]), the
//! [`Scheduler`] (jobs, schedules, run records, reruns of interrupted ticks), the
//! [`LeaderElection`] that runs any [`Elector`]'s campaign, and, with the
//! `metrics` feature, [`metrics`].
//!
//! Most users depend on the `shedlock` facade instead, which re-exports all of this.
//!
//! ```
//! use std::time::Duration;
//! use shedlock_core::{InMemoryLockProvider, LockConfiguration};
//! use shedlock_runtime::{LockContext, LockingTaskExecutor};
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
mod lock;
#[cfg(feature = "metrics")]
pub mod metrics;
// With the feature off: the same recording calls, empty.
#[cfg(not(feature = "metrics"))]
#[path = "metrics/off.rs"]
mod metrics;
mod scheduler;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

// The contract's names this crate is written against, as `crate::…`.
use shedlock_core::{
    Candidacy, Clock, ElectedFn, ElectionConfig, Elector, Error, LeaderState, LockConfiguration,
    LockLease, LockProvider, LockRecord, RevokedFn, RunEnd, RunLog, RunOutcome, RunQuery,
    RunRecord, RunStart, SystemClock, Tick, default_holder, validate_holder,
};

pub use election::{LeaderElection, LeaderElectionBuilder};
pub use lock::context::LockContext;
pub use lock::executor::{LockingTaskExecutor, TaskResult};
pub use lock::handle::Lock;
pub use lock::listener::{LockEvent, LockListener};
pub use scheduler::config::SchedulerConfig;
pub use scheduler::job::{IntoJobResult, Job, JobLock};
pub use scheduler::registry::JobRegistry;
pub use scheduler::schedule::Schedule;
pub use scheduler::{
    JobControl, JobOutcome, JobStatus, OnInterrupted, RemoveMode, RunContext, Scheduler,
    SchedulerBuilder, ShutdownReport,
};
