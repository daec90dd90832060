//! Run records: every run of a locked job leaves one in the store beside its lock, so the fleet
//! can tell which instance ran a tick, whether it succeeded, and which runs were interrupted.
//!
//! The scheduler writes them through a [`RunLog`], which every store of this workspace
//! implements next to its lock provider (checked by `shedlock_conformance::runs`).

mod log;
mod record;
mod retention;

pub use log::{RunLog, RunQuery};
pub use record::{MAX_ERROR_LEN, RunCursor, RunEnd, RunOutcome, RunRecord, RunStart};
pub use retention::{
    DEFAULT_RUN_RETENTION, DEFAULT_RUNS_PER_LOCK, RUN_TRIM_SLACK, validate_run_retention,
};
