//! What the per-database test files share: the conformance harness over any provider, the
//! scenarios every dialect runs, and statements to inspect a table. URLs and unique names come
//! from `shedlock-test-support`.

// Each test binary uses a different part of this module.
#![allow(dead_code)]

pub(crate) mod board;
pub(crate) mod scenarios;
pub(crate) mod server_cases;
pub(crate) mod statements;

use shedlock_conformance::ServerHarness;
pub(crate) use shedlock_conformance::unique_table;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use shedlock_core::{LockConfiguration, LockLease, LockProvider};
use shedlock_sqlx::SqlLockProvider;
use shedlock_sqlx::dialect::Dialect;

use scenarios::ProviderExt as _;

/// The conformance harness over `provider`'s table: a provider per holder on it, the provider
/// itself as inspector and run log, and providers on the same tables with other run settings.
pub(crate) fn harness_over<D: Dialect>(provider: SqlLockProvider<D>) -> ServerHarness {
    ServerHarness::new({
        let provider = provider.clone();
        move |holder| Arc::new(provider.clone_as(holder))
    })
    .with_inspector(provider.clone())
    .with_run_log_keeping({
        let provider = provider.clone();
        move |retention, runs_per_lock| Arc::new(keeping(&provider, retention, runs_per_lock))
    })
    .with_run_log(provider)
}

/// A provider on `provider`'s pool and tables whose builder was given `run_retention(retention)`
/// and `runs_per_lock(runs_per_lock)`.
pub(crate) fn keeping<D: Dialect>(
    provider: &SqlLockProvider<D>,
    retention: Duration,
    runs_per_lock: u32,
) -> SqlLockProvider<D> {
    SqlLockProvider::<D>::builder(provider.pool().clone())
        .table(provider.table())
        .runs_table(provider.runs_table())
        .holder("keeping")
        .run_retention(retention)
        .runs_per_lock(runs_per_lock)
        .build()
        .expect("valid run settings")
}

/// Whole milliseconds between two instants of the same clock, `later - earlier`.
pub(crate) fn millis_between(earlier: std::time::SystemTime, later: std::time::SystemTime) -> i128 {
    match later.duration_since(earlier) {
        Ok(d) => d.as_millis() as i128,
        Err(e) => -(e.duration().as_millis() as i128),
    }
}

/// The end of the fencing guard's test: `current`'s lease has run out while a transaction
/// that verified it is still open. A takeover by `taker` waits for that transaction: it has
/// not finished after `patience`; once `commit` has run, it gets the lock, with a greater
/// token.
pub(crate) async fn takeover_waits_for_commit<P>(
    taker: &P,
    config: &LockConfiguration,
    current: &LockLease,
    patience: Duration,
    commit: impl Future<Output = ()>,
) where
    P: LockProvider + Clone + 'static,
{
    let (taker, config) = (taker.clone(), config.clone());
    let takeover = tokio::spawn(async move { taker.acquire(&config).await });
    tokio::time::sleep(patience).await;
    assert!(
        !takeover.is_finished(),
        "took over during a guarded transaction"
    );
    commit.await;
    let next = takeover
        .await
        .unwrap()
        .unwrap()
        .expect("taken over after the commit");
    assert!(next.fencing_token() > current.fencing_token());
}

/// A lock configuration for tests: `lock_at_least_for` zero.
pub(crate) fn lease_config(name: &str, lock_at_most_for: Duration) -> LockConfiguration {
    LockConfiguration::new(name, lock_at_most_for, Duration::ZERO).expect("valid configuration")
}
