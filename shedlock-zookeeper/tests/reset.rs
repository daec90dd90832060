//! State reset by an operator while a holder still runs: a lock node, or the whole root,
//! deleted by hand and created again by another instance. The stale holder's release and
//! extension must be refused, the new holder's lease left alone, and fencing tokens must keep
//! increasing. Needs `SHEDLOCK_TEST_ZK_URL` (skipped without it; failed without it when
//! `CI=true`).

mod common;

use std::time::Duration;

use shedlock_core::{LockConfiguration, LockInspector, LockLease, LockProvider, LockRecord};
use shedlock_test_support::stores::{acquire_free, assert_stale_lease_refused, take_over};
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

/// What an operator deletes by hand while a holder runs.
enum Deleted {
    /// The lock node.
    LockNode,
    /// The whole root; the schema is then created again.
    Root,
}

/// Two instances on a root of their own (made of `base`): `first` takes `nightly`, an operator
/// deletes what `deleted` says, and `second` takes the lock (with a token above the stale
/// one); the stale holder's extension and release are refused. The instances, `second`'s
/// lease and the lock's record as `second` reads it; `None` when skipped.
async fn taken_over_after(
    deleted: Deleted,
    base: &str,
) -> Option<(ZkLockProvider, ZkLockProvider, LockLease, LockRecord)> {
    let (first, second) = two_instances(base).await?;
    let stale = acquire_free(&first, &config("nightly"), "free").await;
    let operator = common::raw_client().await;
    match deleted {
        Deleted::LockNode => {
            common::delete_all(&operator, &format!("{}/locks/nightly", first.root())).await;
        }
        Deleted::Root => {
            common::delete_all(&operator, first.root()).await;
            second.create_schema().await.unwrap();
        }
    }
    let current = take_over(&second, &config("nightly"), &stale).await;
    assert_stale_lease_refused(&first, &stale).await;
    let row = second
        .lock_record("nightly")
        .await
        .unwrap()
        .expect("exists");
    Some((first, second, current, row))
}

/// The lock node is deleted by hand while its holder runs, and another instance takes the
/// lock (a new node at the same path, at the same node version as the deleted one): the stale
/// holder's release and extension are refused and leave the new lease as it was; tokens keep
/// increasing.
#[tokio::test]
async fn a_stale_holder_cannot_touch_a_lock_node_created_again() {
    let Some((first, second, current, row)) =
        taken_over_after(Deleted::LockNode, "reset-node").await
    else {
        return;
    };
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
    take_over(&first, &config("nightly"), &current).await;
}

/// The whole root is deleted by hand while a holder runs, the schema created again and the
/// lock taken by another instance: the stale holder's extension and release are refused, and
/// the new token is above every earlier one.
#[tokio::test]
async fn a_stale_holder_cannot_touch_a_lock_after_the_root_is_created_again() {
    let Some((_, second, current, row)) = taken_over_after(Deleted::Root, "reset-root").await
    else {
        return;
    };
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
    let message = common::store_error(first.acquire(&short).await);
    assert!(
        message.contains(&node) && message.contains("incarnation"),
        "{message}"
    );
    assert!(
        message.contains("deleteall"),
        "says how to reset: {message}"
    );

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
