//! Run records as nodes under `<root>/runs`: the run-record conformance cases (without and
//! with credentials), a stalled holder's late end, retention, ACLs, and a record corrupted by
//! hand. Needs `SHEDLOCK_TEST_ZK_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::conformance::unique_lock_name;
use shedlock_core::{Error, LockProvider, RunQuery, RunStart};
use shedlock_test_support::ServerHarness;
use shedlock_test_support::runs::{
    assert_runs_error, end_runs, late_end_of_a_stalled_holder, run_tokens,
};
use shedlock_zookeeper::ZkLockProvider;

fn with_run_log(provider: ZkLockProvider) -> ServerHarness {
    let log = provider.clone();
    ServerHarness::new(move |holder| Arc::new(provider.with_holder(holder).expect("valid holder")))
        .with_run_log(log)
}

shedlock_core::runs_tests!(async { Some(with_run_log(common::provider("runs").await?)) });

/// The cases on a provider with digest credentials, whose nodes are closed to other clients.
mod authenticated {
    use super::*;

    shedlock_core::runs_tests!(async {
        Some(with_run_log(
            common::authenticated_provider("runs-auth").await?,
        ))
    });
}

/// A provider on a root of its own keeping `per_lock` runs per lock for `retention`.
async fn keeping(per_lock: u32, retention: Duration) -> Option<ZkLockProvider> {
    let url = common::zk_url()?;
    let provider = ZkLockProvider::builder(url)
        .root(common::unique_zk_root("runs-kept"))
        .holder("tester")
        .runs_per_lock(per_lock)
        .run_retention(retention)
        .connect()
        .await
        .expect("connect to SHEDLOCK_TEST_ZK_URL");
    provider.create_schema().await.expect("create the schema");
    Some(provider)
}

/// A holder that stalled past its lease ends its run after another instance took the lock
/// and marked it interrupted: the interruption stays.
#[tokio::test]
async fn a_late_end_does_not_overwrite_the_first() {
    let Some(stalled) = common::provider("runs-late").await else {
        return;
    };
    let other = stalled.with_holder("other").unwrap();
    late_end_of_a_stalled_holder(&stalled, &other).await;
}

/// Every 32nd end trims the lock's runs to the newest `runs_per_lock`.
#[tokio::test]
async fn the_newest_runs_per_lock_stay() {
    let Some(provider) = keeping(3, Duration::from_secs(3600)).await else {
        return;
    };
    let log = provider.run_log().unwrap();
    let lock = unique_lock_name("runs-kept");
    end_runs(log, &lock, 1..=32).await;
    assert_eq!(run_tokens(log, &lock).await, [32, 31, 30]);
}

/// Every 32nd end deletes the lock's runs started longer than the retention before it
/// (ensemble time).
#[tokio::test]
async fn runs_older_than_the_retention_go() {
    let retention = Duration::from_millis(300);
    let Some(provider) = keeping(1000, retention).await else {
        return;
    };
    let log = provider.run_log().unwrap();
    let lock = unique_lock_name("runs-aged");
    end_runs(log, &lock, 1..=31).await;
    // The ensemble's clock has to pass the retention; nothing to wait on but time.
    tokio::time::sleep(retention * 2).await;
    end_runs(log, &lock, 32..=32).await;
    assert_eq!(run_tokens(log, &lock).await, [32]);
}

/// Run nodes are closed to other clients when the provider has credentials.
#[tokio::test]
async fn run_nodes_get_the_lock_nodes_acl() {
    let Some(provider) = common::authenticated_provider("runs-acl").await else {
        return;
    };
    let lock = unique_lock_name("runs-acl");
    let start = RunStart::new(&lock, "job", None, "a", 1);
    provider
        .run_log()
        .unwrap()
        .run_started(&start)
        .await
        .unwrap();
    let owner = common::client_as(common::DIGEST_USER, common::DIGEST_PASSWORD).await;
    let anonymous = common::raw_client().await;
    let runs = format!("{}/runs", provider.root());
    let lock_dir = format!("{runs}/{lock}");
    let run = format!("{lock_dir}/00000000000000000001-0000000001");
    for path in [&runs, &lock_dir, &run] {
        common::assert_digest_only(&owner, path).await;
        assert_eq!(
            anonymous.get_data(path).await.map(drop),
            Err(zookeeper_client::Error::NoAuth),
            "{path} is readable without credentials"
        );
    }
}

/// A run node edited by hand into something shedlock never writes: a read fails with a store
/// error naming the node, and nothing panics.
#[tokio::test]
async fn a_corrupt_record_is_a_store_error() {
    let Some(provider) = common::provider("runs-corrupt").await else {
        return;
    };
    let log = provider.run_log().unwrap();
    let lock = unique_lock_name("runs-corrupt");
    let start = RunStart::new(&lock, "job", None, "a", 7);
    log.run_started(&start).await.unwrap();
    let path = format!(
        "{}/runs/{lock}/00000000000000000007-0000000001",
        provider.root()
    );
    let client = common::raw_client().await;
    client.set_data(&path, b"{not json", None).await.unwrap();
    assert_runs_error(log.runs(&RunQuery::lock(&lock)).await, &lock, &[&path]);
}

#[tokio::test]
async fn bad_run_settings_name_their_field() {
    for (builder, field) in [
        (
            ZkLockProvider::builder("127.0.0.1:1").runs_per_lock(0),
            "runs_per_lock",
        ),
        (
            ZkLockProvider::builder("127.0.0.1:1").run_retention(Duration::ZERO),
            "run_retention",
        ),
    ] {
        match builder.connect().await {
            Err(Error::InvalidConfig { field: got, .. }) => assert_eq!(got, field),
            other => panic!("{field}: expected invalid config, got {other:?}"),
        }
    }
}
