//! The digest password never reaches `Debug` output, errors or logs (this crate's and the
//! ZooKeeper client's, at TRACE level), through a whole life: connect, schema, locks, an
//! election, a refused provider, an unreachable ensemble. Needs `SHEDLOCK_TEST_ZK_URL`
//! (skipped without it; failed without it when `CI=true`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use shedlock_conformance::election::Candidates;
use shedlock_core::{ElectionConfig, Elector, LockConfiguration, LockProvider};
use shedlock_zookeeper::{ZkElector, ZkLockProvider};

const CONFIG: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_millis(3_000),
    renew_deadline: Duration::from_millis(2_000),
    retry_period: Duration::from_millis(500),
};

// One thread: the client's session tasks run where the capturing subscriber is the default.
#[tokio::test(flavor = "current_thread")]
async fn the_password_reaches_no_debug_output_error_or_log() {
    let Some(url) = common::zk_url() else {
        return;
    };
    let (logs, _default) = common::capture_logs();
    let mut printed = Vec::new();

    common::open_test_parent().await;
    let builder = ZkLockProvider::builder(url.as_str())
        .root(common::unique_zk_root("secrets"))
        .digest_auth(common::DIGEST_USER, common::DIGEST_PASSWORD);
    printed.push(format!("{builder:?}"));
    let provider = builder.connect().await.unwrap();
    provider.create_schema().await.unwrap();
    printed.push(format!("{provider:?}"));
    let config = LockConfiguration::new("job", Duration::from_secs(30), Duration::ZERO).unwrap();
    let lease = provider.acquire(&config).await.unwrap().expect("free");
    let lease = provider
        .extend(&lease, Duration::from_secs(30), Duration::ZERO)
        .await
        .unwrap()
        .expect("held");
    assert!(provider.release(&lease).await.unwrap());

    let elector_builder = ZkElector::builder(url.as_str())
        .root(provider.root())
        .digest_auth(common::DIGEST_USER, common::DIGEST_PASSWORD);
    printed.push(format!("{elector_builder:?}"));
    let elector = elector_builder.connect().await.unwrap();
    printed.push(format!("{elector:?}"));
    printed.push(format!("{:?}", provider.elector()));
    let candidates = Candidates::start("batch", CONFIG, [Arc::new(elector) as Arc<dyn Elector>]);
    candidates.next_leader(None, CONFIG.lease_duration).await;
    candidates.resign_all().await;

    // Refused: no credentials on a closed root; wrong password; nobody listening.
    let anonymous = ZkLockProvider::builder(url.as_str())
        .root(provider.root())
        .connect()
        .await
        .unwrap();
    let refused = anonymous.acquire(&config).await.unwrap_err();
    printed.push(format!("{refused} / {refused:?}"));
    let wrong = ZkLockProvider::builder(url.as_str())
        .root(provider.root())
        .digest_auth(
            common::DIGEST_USER,
            format!("{}-old", common::DIGEST_PASSWORD),
        )
        .connect()
        .await
        .unwrap();
    let refused = wrong.create_schema().await.unwrap_err();
    printed.push(format!("{refused} / {refused:?}"));
    let closed = format!("127.0.0.1:{}", shedlock_test_support::stores::free_port());
    let unreachable = ZkLockProvider::builder(closed)
        .digest_auth(common::DIGEST_USER, common::DIGEST_PASSWORD)
        .request_timeout(Duration::from_secs(2))
        .connect()
        .await
        .unwrap_err();
    printed.push(format!("{unreachable} / {unreachable:?}"));
    let invalid = ZkLockProvider::builder(url.as_str())
        .digest_auth("a:b", common::DIGEST_PASSWORD)
        .connect()
        .await
        .unwrap_err();
    printed.push(format!("{invalid} / {invalid:?}"));

    let logs = logs.text();
    assert!(
        logs.contains("zookeeper_client"),
        "the client's own logs were captured"
    );
    for text in printed.iter().chain([&logs]) {
        assert!(
            !text.contains(common::DIGEST_PASSWORD),
            "the password was printed: {text}"
        );
    }
    assert!(printed[0].contains(common::DIGEST_USER), "{}", printed[0]);
}
