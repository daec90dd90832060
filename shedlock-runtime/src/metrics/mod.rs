//! Metrics of locks, scheduled runs and elections, through the [`metrics`](https://docs.rs/metrics)
//! facade, so any exporter works (Prometheus, StatsD, OpenTelemetry…). Feature `metrics`.
//!
//! With the feature on, every executor, scheduler and election of the process records into the
//! global recorder the application installs (`metrics::set_global_recorder`, or an exporter's
//! `install`); without a recorder the facade drops them. With the feature off nothing of this
//! exists: the recording calls are empty and compiled out.
//!
//! Names follow Prometheus' conventions: a `shedlock_` prefix, the unit in the name,
//! `_total` on counters. Labels are few and bounded: `lock` (see [`LockLabel`]), `job` (the
//! registered jobs), `election`, `operation` and `outcome` (fixed sets). [`names`] lists every
//! metric; the README has the same table for dashboards and alerts.
//!
//! ```no_run
//! # fn install_prometheus() {}
//! // Once at start, before the first lock is taken: lock names such as `invoice-81723`
//! // counted under `invoice` only.
//! use shedlock_runtime::metrics::{LockLabel, set_lock_label};
//!
//! set_lock_label(LockLabel::map(|name| {
//!     name.split_once('-').map_or(name, |(family, _)| family).to_owned()
//! }))
//! .expect("set once");
//! install_prometheus();
//! ```

mod recorder;

use std::fmt;
use std::sync::{Arc, OnceLock};

pub(crate) use recorder::{ElectionMetrics, JobMetrics, lock_event};

/// Every metric's name.
pub mod names {
    /// Counter (`lock`): acquisitions asked of the store.
    pub const LOCK_ACQUIRE_ATTEMPTS: &str = "shedlock_lock_acquire_attempts_total";
    /// Counter (`lock`): acquisitions granted.
    pub const LOCK_ACQUIRED: &str = "shedlock_lock_acquired_total";
    /// Counter (`lock`): acquisitions refused because another holder had the lock.
    pub const LOCK_NOT_ACQUIRED: &str = "shedlock_lock_not_acquired_total";
    /// Counter (`lock`, `operation` = `acquire` | `extend` | `release`): the store failed.
    pub const LOCK_STORE_ERRORS: &str = "shedlock_lock_store_errors_total";
    /// Counter (`lock`): leases released.
    pub const LOCK_RELEASED: &str = "shedlock_lock_released_total";
    /// Counter (`lock`): leases extended (keep-alive, heartbeats, `Lock::extend`).
    pub const LOCK_EXTENSIONS: &str = "shedlock_lock_extensions_total";
    /// Counter (`lock`): extensions that failed or were refused.
    pub const LOCK_EXTENSION_FAILURES: &str = "shedlock_lock_extension_failures_total";
    /// Counter (`lock`): leases that could no longer be trusted (the task was signalled, or
    /// a grant came too late to be used).
    pub const LOCK_LOST: &str = "shedlock_lock_lost_total";
    /// Counter (`job`, `outcome`): scheduler ticks by how they ended: `succeeded`, `failed`,
    /// `panicked`, `skipped` (held elsewhere), `not_leader`, `missed`, `leadership_lost`,
    /// `store_error`, `aborted`.
    pub const JOB_TICKS: &str = "shedlock_job_ticks_total";
    /// Histogram (`job`), seconds: how long runs on this instance took, whatever their outcome.
    pub const JOB_RUN_DURATION: &str = "shedlock_job_run_duration_seconds";
    /// Gauge (`job`): 1 while a run is going on this instance.
    pub const JOB_RUNNING: &str = "shedlock_job_running";
    /// Counter (`job`): fire times not run: too late (misfire threshold), passed over after a
    /// pause, or overlapped by this instance's previous run.
    pub const JOB_MISSED_TICKS: &str = "shedlock_job_missed_ticks_total";
    /// Gauge (`election`): 1 while this instance leads.
    pub const ELECTION_LEADER: &str = "shedlock_election_leader";
    /// Counter (`election`): terms this instance was elected for.
    pub const ELECTION_TERMS: &str = "shedlock_election_terms_total";
    /// Counter (`election`): terms of this instance that ended (resigned, lost, deadline
    /// passed): the leadership was handed over.
    pub const ELECTION_HANDOVERS: &str = "shedlock_election_handovers_total";
}

/// How lock names become the `lock` label. A label value is a time series per value for as
/// long as the process lives: an application that takes locks with dynamic names (one per
/// invoice, per tenant) maps them to a few families or omits the label.
#[derive(Clone, Default)]
pub enum LockLabel {
    /// The lock's name as it is (the default): right for scheduled jobs, whose lock names are
    /// fixed in code.
    #[default]
    Name,
    /// The name mapped by a function, e.g. `invoice-81723` to `invoice`.
    Map(Arc<dyn Fn(&str) -> String + Send + Sync>),
    /// No `lock` label: one series per metric for the whole process.
    Omit,
}

impl LockLabel {
    /// [`LockLabel::Map`] of `map`.
    pub fn map(map: impl Fn(&str) -> String + Send + Sync + 'static) -> Self {
        LockLabel::Map(Arc::new(map))
    }

    /// The label value for `name`; `None` to leave the label out.
    pub fn value(&self, name: &str) -> Option<String> {
        match self {
            LockLabel::Name => Some(name.to_owned()),
            LockLabel::Map(map) => Some(map(name)),
            LockLabel::Omit => None,
        }
    }
}

impl fmt::Debug for LockLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LockLabel::Name => "Name",
            LockLabel::Map(_) => "Map(..)",
            LockLabel::Omit => "Omit",
        })
    }
}

static LOCK_LABEL: OnceLock<LockLabel> = OnceLock::new();

/// Sets how lock names become the `lock` label, for the whole process (as the recorder is):
/// once, before the first lock is taken.
///
/// # Errors
/// Gives `label` back when the label was already set, or a lock was already recorded with the
/// default.
pub fn set_lock_label(label: LockLabel) -> Result<(), LockLabel> {
    LOCK_LABEL.set(label)
}

fn lock_label() -> &'static LockLabel {
    LOCK_LABEL.get_or_init(LockLabel::default)
}

/// Registers each metric's description and unit with the installed recorder (the `# HELP`
/// lines of a Prometheus scrape). Optional; call it after installing the recorder.
pub fn describe() {
    use metrics::{Unit, describe_counter, describe_gauge, describe_histogram};
    use names::*;
    describe_counter!(
        LOCK_ACQUIRE_ATTEMPTS,
        "Lock acquisitions asked of the store"
    );
    describe_counter!(LOCK_ACQUIRED, "Lock acquisitions granted");
    describe_counter!(LOCK_NOT_ACQUIRED, "Acquisitions refused: held elsewhere");
    describe_counter!(LOCK_STORE_ERRORS, "Lock store failures, by operation");
    describe_counter!(LOCK_RELEASED, "Leases released");
    describe_counter!(LOCK_EXTENSIONS, "Leases extended");
    describe_counter!(LOCK_EXTENSION_FAILURES, "Extensions failed or refused");
    describe_counter!(LOCK_LOST, "Leases that could no longer be trusted");
    describe_counter!(JOB_TICKS, "Scheduler ticks, by outcome");
    describe_histogram!(JOB_RUN_DURATION, Unit::Seconds, "Run duration");
    describe_gauge!(JOB_RUNNING, "1 while a run is going on this instance");
    describe_counter!(JOB_MISSED_TICKS, "Fire times not run");
    describe_gauge!(ELECTION_LEADER, "1 while this instance leads");
    describe_counter!(ELECTION_TERMS, "Terms this instance was elected for");
    describe_counter!(ELECTION_HANDOVERS, "Terms of this instance that ended");
}

#[cfg(test)]
mod tests;
