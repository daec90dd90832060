//! The contract of [shedlock](https://docs.rs/shedlock): what a store implements and what tools
//! read, with nothing of the runtime that uses it.
//!
//! - Locks: [`LockConfiguration`], the [`LockProvider`] a store implements and the
//!   [`LockLease`] it grants, the one view of a stored lock ([`LockRecord`], [`LockInspector`]),
//!   holder names, clocks ([`Clock`]) and the store's side of release hints
//!   ([`ReleaseHintFanOut`]).
//! - Run records: [`RunLog`] and what it stores and answers ([`RunStart`], [`RunEnd`],
//!   [`RunRecord`], [`RunQuery`]), with the retention every store keeps.
//! - Elections: the [`Elector`] a store campaigns with, reporting to a [`Candidacy`].
//! - The fleet's jobs: the small keyed [`Board`] a store keeps beside its locks, and the
//!   [`Fleet`] on it (jobs published by the instances carrying them, pause, resume, run now).
//! - One [`Error`] for all of them, and [`InMemoryLockProvider`], a store in this process.
//!
//! The executor, scheduler, recovery, election runtime and metrics are in `shedlock-runtime`;
//! the provider conformance suite a store is tested with is `shedlock-conformance`. Most users
//! depend on the `shedlock` facade instead, which re-exports all of this.
//!
//! ```
//! use std::time::Duration;
//! use shedlock_core::{InMemoryLockProvider, LockConfiguration, LockProvider};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), shedlock_core::Error> {
//! let store = InMemoryLockProvider::new();
//! let config = LockConfiguration::new("send_newsletter", Duration::from_secs(300), Duration::from_secs(10))?;
//! let lease = store.acquire(&config).await?.expect("nobody else holds it");
//! assert!(store.acquire(&config).await?.is_none(), "held until released");
//! assert!(store.release(&lease).await?);
//! # Ok(())
//! # }
//! ```

mod election;
mod error;
mod fleet;
mod lock;
mod runs;

pub use election::{Candidacy, ElectedFn, ElectionConfig, Elector, LeaderState, RevokedFn};
pub use error::{BoxError, Error, Operation};
pub use fleet::board::{
    Board, BoardCondition, BoardEntry, MAX_BOARD_KEY_LEN, MAX_BOARD_VALUE_LEN, validate_board_entry,
};
pub use fleet::jobs::{Fleet, FleetJob, JobCarrier, JobDefinition, Paused, RunRequest, Switches};
pub use lock::clock::{Clock, ManualClock, SystemClock, TokioClock};
pub use lock::config::LockConfiguration;
pub use lock::hints::{ReleaseHintFanOut, ReleaseHintSource};
pub use lock::holder::{MAX_HOLDER_LEN, default_holder, validate_holder};
pub use lock::memory::InMemoryLockProvider;
pub use lock::provider::{LockLease, LockProvider};
pub use lock::record::{LockInspector, LockQuery, LockRecord};
pub use lock::tick::Tick;
pub use runs::{
    DEFAULT_RUN_RETENTION, DEFAULT_RUNS_PER_LOCK, MAX_ERROR_LEN, RUN_TRIM_SLACK, RunCursor, RunEnd,
    RunLog, RunOutcome, RunQuery, RunRecord, RunStart, validate_run_retention,
};
pub use shedlock_rules::{MAX_DURATION, MAX_LOCK_NAME_LEN};

/// The checks `LockConfiguration::new` makes, for the runtime's own lock settings (jobs,
/// keep-alive) to name their fields. **Not public API.**
#[doc(hidden)]
pub mod __private {
    pub use crate::lock::config::{
        validate_durations, validate_keep_alive_interval, validate_lock_name,
    };
}

/// The `async_trait` attribute, re-exported for implementing [`LockProvider`].
pub use async_trait::async_trait;
