//! What the per-database test files share: the conformance harness over any provider, the
//! scenarios every dialect runs, and statements to inspect a table. URLs and unique names come
//! from `shedlock-test-support`.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

pub(crate) mod scenarios;
pub(crate) mod server_cases;
pub(crate) mod statements;

use shedlock_test_support::ServerHarness;
pub(crate) use shedlock_test_support::unique_table;

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::{LockConfiguration, LockInspector, LockProvider, RunLog};

/// The conformance harness over `provider`'s table: a provider per holder on it, and the
/// provider itself as inspector and run log.
pub(crate) fn harness_over<P>(provider: P) -> ServerHarness
where
    P: LockProvider
        + LockInspector
        + RunLog
        + Clone
        + scenarios::ProviderExt
        + Send
        + Sync
        + 'static,
{
    ServerHarness::new({
        let provider = provider.clone();
        move |holder| Arc::new(provider.clone_as(holder))
    })
    .with_inspector(provider.clone())
    .with_run_log(provider)
}

/// Whole milliseconds between two instants of the same clock, `later - earlier`.
pub(crate) fn millis_between(earlier: std::time::SystemTime, later: std::time::SystemTime) -> i128 {
    match later.duration_since(earlier) {
        Ok(d) => d.as_millis() as i128,
        Err(e) => -(e.duration().as_millis() as i128),
    }
}

/// A lock configuration for tests: `lock_at_least_for` zero.
pub(crate) fn lease_config(name: &str, lock_at_most_for: Duration) -> LockConfiguration {
    LockConfiguration::new(name, lock_at_most_for, Duration::ZERO).expect("valid configuration")
}
