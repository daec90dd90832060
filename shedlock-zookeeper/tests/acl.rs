//! Credentials and ACLs against a real ensemble: with digest credentials every node the
//! provider and its elector create is closed to other clients (anonymous, another user, the
//! same user with another password), while the provider works as usual; `create_schema`
//! closes a tree created without credentials; without credentials nodes stay open. Needs
//! `SHEDLOCK_TEST_ZK_URL` (skipped without it; failed without it when `CI=true`).

mod common;

use std::sync::Arc;
use std::time::Duration;

use shedlock_conformance::election::Candidates;
use shedlock_core::{
    ElectionConfig, Elector, LockConfiguration, LockInspector, LockProvider, LockQuery, RunLog,
    RunStart,
};
use shedlock_zookeeper::ZkLockProvider;
use zookeeper_client::{Acls, Client, CreateMode};

const CONFIG: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_millis(3_000),
    renew_deadline: Duration::from_millis(2_000),
    retry_period: Duration::from_millis(500),
};

fn config(name: &str) -> LockConfiguration {
    LockConfiguration::new(name, Duration::from_secs(60), Duration::ZERO).unwrap()
}

/// The single child of `path`.
async fn only_child(client: &Client, path: &str) -> String {
    let children = client.list_children(path).await.unwrap();
    assert_eq!(children.len(), 1, "{path}: {children:?}");
    format!("{path}/{}", children[0])
}

/// Every request `client` may try on `path` is refused as not authorized. (Deleting a node
/// takes a right on its parent: the root's parent is the open test parent, so deleting the
/// root is refused only because it is not empty.)
async fn assert_refused(who: &str, client: &Client, path: &str) {
    let refused = |what: &str, result: Result<(), zookeeper_client::Error>| {
        assert_eq!(
            result,
            Err(zookeeper_client::Error::NoAuth),
            "{who}: {what} {path}"
        );
    };
    refused("read", client.get_data(path).await.map(drop));
    refused("write", client.set_data(path, b"x", None).await.map(drop));
    let deleted = client.delete(path, None).await;
    if path.matches('/').count() > 2 {
        refused("delete", deleted);
    } else {
        assert_eq!(
            deleted,
            Err(zookeeper_client::Error::NotEmpty),
            "{who}: delete {path}"
        );
    }
    refused(
        "change the ACL of",
        client
            .set_acl(path, &Acls::anyone_all(), None)
            .await
            .map(drop),
    );
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    refused(
        "create a node under",
        client
            .create(&format!("{path}/x"), b"", &open)
            .await
            .map(drop),
    );
}

/// With credentials, the root, its nodes, a lock node and its incarnation child, an election's
/// node and a candidate's node all refuse every request of an anonymous client, of another
/// user, and of the same user with another password; their ACL is all rights for the user and
/// nothing else. The provider and the election work as usual.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_credentials_nodes_are_closed_to_other_clients() {
    let Some(provider) = common::authenticated_provider("acl-closed").await else {
        return;
    };
    let root = provider.root().to_owned();
    let lease = provider
        .acquire(&config("nightly"))
        .await
        .unwrap()
        .expect("free");
    let elector = provider.elector();
    let candidates = Candidates::start(
        "batch",
        CONFIG,
        [Arc::new(elector.clone()) as Arc<dyn Elector>],
    );
    candidates.next_leader(None, CONFIG.lease_duration).await;

    let owner = common::client_as(common::DIGEST_USER, common::DIGEST_PASSWORD).await;
    let lock = format!("{root}/locks/nightly");
    let election = elector.election_path("batch");
    let nodes = [
        root.clone(),
        format!("{root}/clock"),
        format!("{root}/locks"),
        format!("{root}/elections"),
        lock.clone(),
        only_child(&owner, &lock).await,
        election.clone(),
        only_child(&owner, &election).await,
    ];
    let others = [
        ("anonymous", common::raw_client().await),
        ("another user", common::client_as("intruder", "pw").await),
        (
            "the same user with another password",
            common::client_as(common::DIGEST_USER, "guess").await,
        ),
    ];
    for node in &nodes {
        common::assert_digest_only(&owner, node).await;
        for (who, client) in &others {
            assert_refused(who, client, node).await;
        }
    }

    assert_eq!(candidates.leaders().len(), 1, "the election goes on");
    let extended = provider
        .extend(&lease, Duration::from_secs(120), Duration::ZERO)
        .await
        .unwrap()
        .expect("still held");
    let rows = provider.list_locks(&LockQuery::all()).await.unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].held);
    assert!(provider.release(&extended).await.unwrap());
    let again = provider
        .acquire(&config("nightly"))
        .await
        .unwrap()
        .expect("released");
    assert!(again.fencing_token() > extended.fencing_token());
    candidates.resign_all().await;
}

/// A tree created without credentials is open to everyone; `create_schema` with credentials
/// closes every node in it (the lock node and its child, the election node too). A provider
/// without credentials is then refused with an error saying what to configure.
#[tokio::test]
async fn create_schema_with_credentials_closes_an_open_tree() {
    let Some(open) = common::provider("acl-migrate").await else {
        return;
    };
    let lease = open
        .acquire(&config("nightly"))
        .await
        .unwrap()
        .expect("free");
    let anonymous = common::raw_client().await;
    let lock = format!("{}/locks/nightly", open.root());
    let (acl, _) = anonymous.get_acl(&lock).await.unwrap();
    assert_eq!(
        &acl,
        &*Acls::anyone_all(),
        "without credentials nodes stay open"
    );
    let child = only_child(&anonymous, &lock).await;
    anonymous
        .set_data(&child, b"anyone may", None)
        .await
        .expect("open");
    let run = RunStart::new("nightly", "job", None, "tester", lease.fencing_token());
    open.run_started(&run).await.unwrap();
    let run_dir = format!("{}/runs/nightly", open.root());
    let run_node = only_child(&anonymous, &run_dir).await;

    let closed = ZkLockProvider::builder(common::zk_url().unwrap())
        .root(open.root())
        .holder("tester")
        .digest_auth(common::DIGEST_USER, common::DIGEST_PASSWORD)
        .connect()
        .await
        .unwrap();
    closed.create_schema().await.unwrap();
    for node in [
        open.root().to_owned(),
        format!("{}/clock", open.root()),
        format!("{}/locks", open.root()),
        format!("{}/elections", open.root()),
        lock.clone(),
        child,
        format!("{}/runs", open.root()),
        run_dir,
        run_node,
    ] {
        assert_refused("anonymous", &anonymous, &node).await;
    }
    let message = common::store_error(open.release(&lease).await);
    assert!(
        message.contains("not authorized") && message.contains("digest_auth"),
        "{message}"
    );
    let taken = closed.acquire(&config("other")).await.unwrap();
    assert!(taken.is_some(), "the provider with credentials works");
}

/// On a closed tree `create_schema` reads a node per lock, not per run record: the runs in a
/// closed run directory are not looked at (only this user could have created them). Shown
/// with a run node the user itself created open by hand in a closed directory: it is left
/// as it is, while an open run directory is closed with its runs.
#[tokio::test]
async fn create_schema_does_not_read_the_runs_of_closed_run_directories() {
    let Some(provider) = common::authenticated_provider("acl-runs").await else {
        return;
    };
    let start = RunStart::new("nightly", "job", None, "tester", 1);
    provider.run_started(&start).await.unwrap();
    let owner = common::client_as(common::DIGEST_USER, common::DIGEST_PASSWORD).await;
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let run_dir = format!("{}/runs/nightly", provider.root());
    let by_hand = format!("{run_dir}/00000000000000000002-0000000001");
    owner.create(&by_hand, b"{}", &open).await.unwrap();
    provider.create_schema().await.unwrap();
    let (acl, _) = owner.get_acl(&by_hand).await.unwrap();
    assert_eq!(&acl, &*Acls::anyone_all(), "not looked at");
    common::assert_digest_only(&owner, &run_dir).await;
}

/// A candidate without credentials on a closed election is refused each time it tries to
/// join: it says so and tries again once per retry period (it neither gives up nor opens
/// session after session in a loop), and the authenticated leader is undisturbed.
#[tokio::test(flavor = "current_thread")]
async fn a_candidate_refused_by_the_acl_says_so_and_retries_at_its_pace() {
    let Some(closed) = common::authenticated_provider("acl-candidate").await else {
        return;
    };
    let owner = Candidates::start(
        "batch",
        CONFIG,
        [Arc::new(closed.elector()) as Arc<dyn Elector>],
    );
    owner.next_leader(None, CONFIG.lease_duration).await;
    let anonymous = ZkLockProvider::builder(common::zk_url().unwrap())
        .root(closed.root())
        .connect()
        .await
        .unwrap();
    let (logs, _default) = common::capture_logs();
    let intruder = Candidates::start(
        "batch",
        CONFIG,
        [Arc::new(anonymous.elector()) as Arc<dyn Elector>],
    );
    let refusals = || logs.text().matches("not authorized").count();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while refusals() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the refusal is reported"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let (before, watched) = (refusals(), CONFIG.retry_period * 4);
    tokio::time::sleep(watched).await;
    let during = refusals() - before;
    assert!(
        during <= 4 + 1,
        "{during} refusals within {watched:?}: no pause between attempts"
    );
    assert!(intruder.leaders().is_empty());
    assert_eq!(owner.leaders(), [0]);
    intruder.resign_all().await;
    owner.resign_all().await;
}
