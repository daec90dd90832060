//! `ZkLockProvider` specifics against a real ensemble: ensemble time, tokens across a node
//! deleted by hand, nodes shedlock did not write, nodes from before ticks, a missing schema,
//! inspection, bad configuration. Needs `SHEDLOCK_TEST_ZK_URL` (skipped without it; failed
//! without it when `CI=true`), except the configuration cases.

mod common;

use std::time::{Duration, Instant, SystemTime};

use shedlock_core::{Error, LockConfiguration, LockInspector, LockProvider, LockQuery, Tick};
use shedlock_zookeeper::ZkLockProvider;

fn config(name: &str, lease: Duration) -> LockConfiguration {
    LockConfiguration::new(name, lease, Duration::ZERO).unwrap()
}

/// Leases carry the ensemble's times: `locked_at` is the `mtime` of the write that granted the
/// lock, `lock_until` that plus the lease; inspection reads the same back.
#[tokio::test]
async fn leases_carry_the_ensembles_times() {
    let Some(provider) = common::provider("times").await else {
        return;
    };
    let lease = provider
        .acquire(&config("report", Duration::from_secs(60)))
        .await
        .unwrap()
        .expect("free");
    let client = common::raw_client().await;
    let (_, stat) = client
        .get_data(&format!("{}/locks/report", provider.root()))
        .await
        .unwrap();
    let mtime = std::time::UNIX_EPOCH + Duration::from_millis(stat.mtime as u64);
    assert_eq!(lease.locked_at(), mtime);
    assert_eq!(lease.lock_until(), mtime + Duration::from_secs(60));
    let row = provider
        .lock_record("report")
        .await
        .unwrap()
        .expect("exists");
    assert!(row.held);
    assert_eq!(
        (row.locked_at, row.lock_until, row.fencing_token),
        (lease.locked_at(), lease.lock_until(), lease.fencing_token())
    );
    assert_eq!(row.holder, "tester");
    provider.release(&lease).await.unwrap();
    let row = provider
        .lock_record("report")
        .await
        .unwrap()
        .expect("exists");
    assert!(!row.held, "{row}");
    assert!(
        row.to_string()
            .starts_with("report: last held by tester until ")
    );
}

/// Tokens: the node's czxid first, then one more per acquisition; a node deleted by hand (with
/// its incarnation child, as zkCli's `deleteall` does) starts again above every token it gave.
#[tokio::test]
async fn tokens_keep_increasing_across_a_node_deleted_by_hand() {
    let Some(provider) = common::provider("tokens").await else {
        return;
    };
    let c = config("nightly", Duration::from_secs(60));
    let mut tokens = Vec::new();
    for _ in 0..3 {
        let lease = provider.acquire(&c).await.unwrap().expect("free");
        tokens.push(lease.fencing_token());
        provider.release(&lease).await.unwrap();
    }
    assert_eq!(tokens[1], tokens[0] + 1);
    assert_eq!(tokens[2], tokens[1] + 1);
    common::delete_all(
        &common::raw_client().await,
        &format!("{}/locks/nightly", provider.root()),
    )
    .await;
    let after = provider.acquire(&c).await.unwrap().expect("free again");
    assert!(
        after.fencing_token() > tokens[2],
        "{tokens:?} then {}",
        after.fencing_token()
    );
}

/// A lock node whose data shedlock did not write is a store error naming the node, and the
/// lock is not taken; other locks work; names with `/` and `%` are plain names.
#[tokio::test]
async fn foreign_nodes_are_clear_errors_and_names_are_plain() {
    let Some(provider) = common::provider("foreign").await else {
        return;
    };
    let client = common::raw_client().await;
    let persistent =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    client
        .create(
            &format!("{}/locks/hand-made", provider.root()),
            b"hello",
            &persistent,
        )
        .await
        .unwrap();
    let hand_made = config("hand-made", Duration::from_secs(5));
    let message = common::store_error(provider.acquire(&hand_made).await);
    assert!(
        message.contains("hand-made") && message.contains("did not write"),
        "{message}"
    );
    for name in ["a/b", "50% off", ".."] {
        let lease = provider
            .acquire(&config(name, Duration::from_secs(5)))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("{name} is free"));
        assert_eq!(lease.name(), name);
    }
    let names: Vec<String> = match provider.list_locks(&LockQuery::all()).await {
        Err(Error::Store { .. }) => Vec::new(), // the hand-made node cannot be read
        Ok(rows) => rows.into_iter().map(|r| r.name).collect(),
        Err(other) => panic!("{other:?}"),
    };
    assert!(
        names.is_empty(),
        "the foreign node makes the listing fail: {names:?}"
    );
    client
        .delete(&format!("{}/locks/hand-made", provider.root()), None)
        .await
        .unwrap();
    let mut names: Vec<String> = provider
        .list_locks(&LockQuery::all())
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    names.sort();
    assert_eq!(names, ["..", "50% off", "a/b"]);
}

/// A page of `list_locks` reads only its own nodes (its limit goes before the reads): a
/// foreign node sorting after the page does not fail it, and is still reported by a listing
/// that reaches it.
#[tokio::test]
async fn a_page_of_locks_reads_only_its_nodes() {
    let Some(provider) = common::provider("lock-page").await else {
        return;
    };
    for name in ["a-1", "a-2", "a-3"] {
        let config = config(name, Duration::from_secs(5));
        assert!(provider.acquire(&config).await.unwrap().is_some());
    }
    let client = common::raw_client().await;
    let open =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let foreign = format!("{}/locks/z-hand-made", provider.root());
    client.create(&foreign, b"hello", &open).await.unwrap();
    let page: Vec<String> = provider
        .list_locks(&LockQuery::all().limit(2))
        .await
        .expect("the page does not reach the foreign node")
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(page, ["a-1", "a-2"]);
    let next: Vec<String> = provider
        .list_locks(&LockQuery::all().after("a-2").limit(1))
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .collect();
    assert_eq!(next, ["a-3"]);
    let message = common::store_error(provider.list_locks(&LockQuery::all()).await);
    assert!(message.contains("z-hand-made"), "{message}");
}

/// Without `create_schema`, acquisition fails saying what to run.
#[tokio::test]
async fn a_missing_schema_says_how_to_create_it() {
    let Some(url) = common::zk_url() else {
        return;
    };
    let provider = ZkLockProvider::builder(url)
        .root(common::unique_zk_root("noschema"))
        .connect()
        .await
        .unwrap();
    match provider.acquire(&config("x", Duration::from_secs(5))).await {
        Err(error @ Error::Store { .. }) => {
            let text = format!("{error}: {}", std::error::Error::source(&error).unwrap());
            assert!(text.contains("create_schema()"), "{text}");
        }
        other => panic!("expected a store error, got {other:?}"),
    }
    provider.create_schema().await.unwrap();
    provider.create_schema().await.expect("idempotent");
    assert!(
        provider
            .acquire(&config("x", Duration::from_secs(5)))
            .await
            .unwrap()
            .is_some()
    );
}

/// Bad configuration names its field before anything is sent; an ensemble nobody answers for
/// is a store error within the request timeout.
#[tokio::test]
async fn bad_configuration_and_unreachable_ensembles_are_clear_errors() {
    let field = |result: Result<ZkLockProvider, Error>| match result {
        Err(Error::InvalidConfig { field, .. }) => field,
        other => panic!("expected InvalidConfig, got {other:?}"),
    };
    let builder = || ZkLockProvider::builder("127.0.0.1:2181");
    assert_eq!(
        field(ZkLockProvider::builder(" ").connect().await),
        "connect_string"
    );
    assert_eq!(field(builder().root("shedlock").connect().await), "root");
    assert_eq!(field(builder().root("/a//b").connect().await), "root");
    assert_eq!(field(builder().holder("a\nb").connect().await), "holder");
    assert_eq!(
        field(builder().request_timeout(Duration::ZERO).connect().await),
        "request_timeout"
    );
    assert_eq!(
        field(
            builder()
                .session_timeout(Duration::from_secs(100 * 24 * 3600))
                .connect()
                .await
        ),
        "session_timeout"
    );
    let closed = format!("127.0.0.1:{}", shedlock_test_support::stores::free_port());
    let started = Instant::now();
    let refused = ZkLockProvider::builder(closed)
        .request_timeout(Duration::from_secs(2))
        .connect()
        .await;
    let message = common::store_error(refused);
    assert!(message.contains("cannot connect to ZooKeeper"), "{message}");
    println!("refused ensemble reported after {:?}", started.elapsed());
}

/// What a provider remembers of its own writes follows its live leases, not every lock name it
/// ever used: released leases are forgotten at once, leases never released once they ended.
#[tokio::test]
async fn remembered_writes_follow_live_leases() {
    let Some(provider) = common::provider("remembered").await else {
        return;
    };
    for i in 0..100 {
        let c = config(&format!("released-{i}"), Duration::from_secs(60));
        let lease = provider.acquire(&c).await.unwrap().expect("free");
        assert!(provider.release(&lease).await.unwrap());
    }
    assert_eq!(provider.remembered_writes(), 0);
    // 300 leases of 1 ms, never released (a holder that gave up on them, or whose release
    // failed): each has ended before the next acquisition's "now" (or within a millisecond).
    for i in 0..300 {
        let c = config(&format!("dropped-{i}"), Duration::from_millis(1));
        drop(provider.acquire(&c).await.unwrap().expect("free"));
    }
    let remembered = provider.remembered_writes();
    assert!(remembered <= 64, "{remembered} writes remembered");
}

/// A lock node written before ticks (no `tick_ms`) has no last tick: its next claim is granted
/// and kept in the node, with the token carried on; releasing keeps it, so the tick is refused
/// the second time.
#[tokio::test]
async fn a_node_from_before_ticks_is_granted_a_tick() {
    let Some(provider) = common::provider("old-node").await else {
        return;
    };
    let node = format!("{}/locks/nightly", provider.root());
    let open =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let operator = common::raw_client().await;
    // What a release by a version before ticks left.
    let old =
        b"holder=web-1\nlease_ms=0\nhold_ms=0\ntoken=41\nlocked_at_ms=1000\nincarnation=0123abcd\n";
    operator.create(&node, old, &open).await.unwrap();
    operator
        .create(&format!("{node}/0123abcd"), b"", &open)
        .await
        .unwrap();
    let tick = Tick::new(SystemTime::now());
    let c = config("nightly", Duration::from_secs(60)).for_tick(tick);
    let lease = provider.acquire(&c).await.unwrap().expect("no last tick");
    assert_eq!(lease.fencing_token(), 42);
    assert!(provider.release(&lease).await.unwrap());
    let (data, _) = operator.get_data(&node).await.unwrap();
    let kept = format!("tick_ms={}\n", tick.millis());
    assert!(
        String::from_utf8_lossy(&data).contains(&kept),
        "the release kept the tick: {:?}",
        String::from_utf8_lossy(&data)
    );
    assert!(
        provider.acquire(&c).await.unwrap().is_none(),
        "granted once"
    );
}

/// The ensemble goes away for a few seconds (connections reset, new ones closed at once) and
/// comes back: acquisitions during the outage fail, and the first one after its return is
/// answered at once, on a new session. The client's own reconnection pauses twice as long
/// after every round it failed (seconds by then), and the request timeout here is shorter
/// than that pause: waiting for that client, the first acquisition after the return failed.
#[tokio::test]
async fn the_first_acquire_after_an_outage_does_not_wait_for_the_clients_pause() {
    use shedlock_conformance::{CutProxy, ProxyMode, unique_lock_name};

    let Some(direct) = common::provider("outage").await else {
        return;
    };
    let upstream = common::zk_url().unwrap();
    let upstream = upstream.split(',').next().unwrap().to_owned();
    let proxy = CutProxy::start(&upstream).await.unwrap();
    let provider = ZkLockProvider::builder(proxy.addr().to_string())
        .root(direct.root())
        .holder("tester")
        .request_timeout(Duration::from_millis(800))
        .connect()
        .await
        .unwrap();
    let lock = config(&unique_lock_name("outage"), Duration::from_secs(30));
    let lease = provider.acquire(&lock).await.unwrap().expect("free");
    assert!(provider.release(&lease).await.unwrap());

    proxy.set(ProxyMode::Reset);
    // Long enough for the client's pause to grow past the request timeout (100 ms, 200 ms,
    // 400 ms, … after each failed round on one server).
    let outage = Instant::now();
    while outage.elapsed() < Duration::from_secs(5) {
        assert!(
            provider.acquire(&lock).await.is_err(),
            "granted while the ensemble was away"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    proxy.set(ProxyMode::Open);
    let lease = provider
        .acquire(&lock)
        .await
        .expect("the first acquisition after the return is answered");
    assert!(lease.is_some(), "the lock is free");
}
