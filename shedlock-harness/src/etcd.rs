//! etcd in the harness: a candidate process (`shedlock-harness etcd-candidate …`) that
//! campaigns through `EtcdElector` and acts as leader at a fixed cadence, as the ZooKeeper
//! candidate does; `etcd-lock-candidate …` campaigns through the lock provider instead (a lease
//! on the election's lock, extended while it leads): a lock holder to kill and pause. The test cluster's members are stopped and started with
//! `shedlock_test_support::EtcdCluster`.

use std::time::Duration;

use anyhow::Context as _;
use shedlock::etcd::EtcdLockProvider;

use crate::ZkCandidateOptions;
use crate::zookeeper::{fatal_on_error, lead};

/// How long an etcd request may take in a candidate: well below the renew deadline, so a
/// member that does not answer is left for another within one renewal.
const REQUEST_TIMEOUT: Duration = Duration::from_millis(700);

/// Runs a candidate (`url`: the endpoints; `root`: the key prefix) until its stdin closes or
/// SIGTERM, then resigns: on `EtcdElector`, or with `on_locks` on `EtcdLockProvider`'s leases.
///
/// # Errors
/// When the cluster cannot be reached or the election does not start; a `fatal` line says why.
pub async fn run_etcd_candidate(options: ZkCandidateOptions, on_locks: bool) -> anyhow::Result<()> {
    let result = async {
        let provider = EtcdLockProvider::builder(options.url.as_str())
            .prefix(&options.root)
            .holder(&options.holder)
            .request_timeout(REQUEST_TIMEOUT)
            .connect()
            .await
            .with_context(|| format!("cannot reach etcd at {}", options.url))?;
        if on_locks {
            lead(&options, provider).await
        } else {
            lead(&options, provider.elector()).await
        }
    }
    .await;
    fatal_on_error(result)
}
