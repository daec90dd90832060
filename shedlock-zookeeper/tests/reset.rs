//! State reset by an operator while a holder still runs: a lock node, or the whole root,
//! deleted by hand and created again by another instance. The stale holder's release and
//! extension must be refused, the new holder's lease left alone, and fencing tokens must keep
//! increasing. Needs `SHEDLOCK_TEST_ZK_URL` (skipped without it; failed without it when
//! `CI=true`).

mod common;

use std::time::Duration;

use shedlock_core::{LockConfiguration, LockInspector, LockProvider};
use shedlock_zookeeper::ZkLockProvider;

fn config(name: &str) -> LockConfiguration {
    LockConfiguration::new(name, Duration::from_secs(60), Duration::ZERO).unwrap()
}

/// Two instances (each its own provider and session) on one root.
async fn two_instances(base: &str) -> Option<(ZkLockProvider, ZkLockProvider)> {
    let url = common::zk_url()?;
    let root = common::unique_zk_root(base);
    let connect = |holder: &'static str| {
        ZkLockProvider::builder(url.as_str())
            .root(root.as_str())
            .holder(holder)
            .connect()
    };
    let first = connect("first").await.expect("connect");
    first.create_schema().await.expect("create the schema");
    let second = connect("second").await.expect("connect");
    Some((first, second))
}

/// The lock node is deleted by hand while its holder runs, and another instance takes the
/// lock (a new node at the same path, at the same node version as the deleted one): the stale
/// holder's release and extension are refused and leave the new lease as it was; tokens keep
/// increasing.
#[tokio::test]
async fn a_stale_holder_cannot_touch_a_lock_node_created_again() {
    let Some((first, second)) = two_instances("reset-node").await else {
        return;
    };
    let stale = first
        .acquire(&config("nightly"))
        .await
        .unwrap()
        .expect("free");
    let operator = common::raw_client().await;
    common::delete_all(&operator, &format!("{}/locks/nightly", first.root())).await;
    let current = second
        .acquire(&config("nightly"))
        .await
        .unwrap()
        .expect("deleted: free");
    assert!(current.fencing_token() > stale.fencing_token());

    let extended = first
        .extend(&stale, Duration::from_secs(600), Duration::ZERO)
        .await
        .unwrap();
    assert!(
        extended.is_none(),
        "the stale holder extended the new holder's lock"
    );
    assert!(
        !first.release(&stale).await.unwrap(),
        "the stale holder released the new holder's lock"
    );
    let row = second
        .lock_record("nightly")
        .await
        .unwrap()
        .expect("exists");
    assert!(row.held, "{row}");
    assert_eq!(
        (row.holder.as_str(), row.fencing_token, row.lock_until),
        ("second", current.fencing_token(), current.lock_until()),
        "the new lease is untouched"
    );
    assert!(
        first.acquire(&config("nightly")).await.unwrap().is_none(),
        "still held"
    );
    assert!(second.release(&current).await.unwrap());
    let next = first
        .acquire(&config("nightly"))
        .await
        .unwrap()
        .expect("released");
    assert!(next.fencing_token() > current.fencing_token());
}

/// The whole root is deleted by hand while a holder runs, the schema created again and the
/// lock taken by another instance: the stale holder's extension and release are refused, and
/// the new token is above every earlier one.
#[tokio::test]
async fn a_stale_holder_cannot_touch_a_lock_after_the_root_is_created_again() {
    let Some((first, second)) = two_instances("reset-root").await else {
        return;
    };
    let stale = first
        .acquire(&config("nightly"))
        .await
        .unwrap()
        .expect("free");
    let operator = common::raw_client().await;
    common::delete_all(&operator, first.root()).await;
    second.create_schema().await.unwrap();
    let current = second
        .acquire(&config("nightly"))
        .await
        .unwrap()
        .expect("deleted: free");
    assert!(current.fencing_token() > stale.fencing_token());

    let extended = first
        .extend(&stale, Duration::from_secs(600), Duration::ZERO)
        .await
        .unwrap();
    assert!(
        extended.is_none(),
        "the stale holder extended the new holder's lock"
    );
    assert!(
        !first.release(&stale).await.unwrap(),
        "the stale holder released the new holder's lock"
    );
    let row = second
        .lock_record("nightly")
        .await
        .unwrap()
        .expect("exists");
    assert_eq!(
        (row.held, row.holder.as_str(), row.fencing_token),
        (true, "second", current.fencing_token()),
        "the new lease is untouched: {row}"
    );
    assert!(second.release(&current).await.unwrap());
}

/// A lock node whose incarnation child alone was deleted by hand is a clear error naming the
/// node (acquisition), and its holder's release is refused rather than written unguarded; a
/// node written by hand with valid data but no incarnation is given one by the next
/// acquisition.
#[tokio::test]
async fn a_lock_node_without_its_incarnation_is_reported_or_adopted() {
    let Some((first, _)) = two_instances("reset-child").await else {
        return;
    };
    let operator = common::raw_client().await;
    let delete_child = async |node: &str| {
        let children = operator.list_children(node).await.unwrap();
        assert_eq!(children.len(), 1, "{children:?}");
        let child = format!("{node}/{}", children[0]);
        operator.delete(&child, None).await.unwrap();
    };
    let held = first.acquire(&config("held")).await.unwrap().expect("free");
    let node = format!("{}/locks/held", first.root());
    delete_child(&node).await;
    let (_, before) = operator.get_data(&node).await.unwrap();
    assert!(!first.release(&held).await.unwrap(), "refused");
    let (_, after) = operator.get_data(&node).await.unwrap();
    assert_eq!(before.version, after.version, "not written unguarded");

    let short = LockConfiguration::new("ended", Duration::from_millis(1), Duration::ZERO).unwrap();
    first.acquire(&short).await.unwrap().expect("free");
    let node = format!("{}/locks/ended", first.root());
    delete_child(&node).await;
    match first.acquire(&short).await {
        Err(shedlock_core::Error::Store { source, .. }) => {
            let message = source.to_string();
            assert!(
                message.contains(&node) && message.contains("incarnation"),
                "{message}"
            );
            assert!(
                message.contains("deleteall"),
                "says how to reset: {message}"
            );
        }
        other => panic!("expected a store error, got {other:?}"),
    }

    let open =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    let by_hand = format!("{}/locks/by-hand", first.root());
    operator
        .create(&by_hand, b"holder=someone\nlease_ms=0\n", &open)
        .await
        .unwrap();
    let lease = first
        .acquire(&config("by-hand"))
        .await
        .unwrap()
        .expect("free");
    assert_eq!(operator.list_children(&by_hand).await.unwrap().len(), 1);
    assert!(first.release(&lease).await.unwrap());
}
