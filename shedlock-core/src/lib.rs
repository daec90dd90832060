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

mod clock;
mod config;
mod context;
mod election;
mod error;
mod executor;
mod holder;
mod job;
mod listener;
mod lock;
mod lock_config;
mod memory;
mod provider;
mod registry;
mod schedule;
mod scheduler;

#[doc(hidden)]
#[path = "private.rs"]
pub mod __private;

#[cfg(feature = "test-util")]
pub mod conformance;

pub use clock::{Clock, ManualClock, SystemClock, TokioClock};
pub use config::SchedulerConfig;
pub use context::LockContext;
pub use election::{
    Candidacy, ElectionConfig, Elector, LeaderElection, LeaderElectionBuilder, LeaderState,
};
pub use error::{BoxError, Error, Operation};
pub use executor::{LockingTaskExecutor, TaskResult};
pub use holder::{MAX_HOLDER_LEN, default_holder, validate_holder};
pub use job::{IntoJobResult, Job, JobLock};
pub use listener::{LockEvent, LockListener};
pub use lock::Lock;
pub use lock_config::{LockConfiguration, MAX_LOCK_NAME_LEN};
pub use memory::InMemoryLockProvider;
pub use provider::{LockLease, LockProvider};
pub use registry::JobRegistry;
pub use schedule::Schedule;
pub use scheduler::{JobOutcome, JobStatus, Scheduler, SchedulerBuilder, ShutdownReport};

/// The `async_trait` attribute, re-exported for implementing [`LockProvider`].
pub use async_trait::async_trait;
