//! `ZkElector` against a real ZooKeeper ensemble: three candidates in this process, each on a
//! session of its own. Needs `SHEDLOCK_TEST_ZK_URL`; skipped without it, failed without it when
//! `CI=true`. Faults between processes (SIGKILL, SIGSTOP, servers stopped) are in
//! `shedlock-harness/tests/zookeeper_faults.rs`.

mod common;

use std::sync::Arc;
use std::time::Duration;

use shedlock_conformance::election::{Candidates, ElectionEvent};
use shedlock_core::{ElectionConfig, Elector, Error};
use shedlock_runtime::LeaderElection;
use shedlock_zookeeper::ZkElector;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::time::Instant;

const CONFIG: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_millis(3_000),
    renew_deadline: Duration::from_millis(2_000),
    retry_period: Duration::from_millis(500),
};

/// An elector under a root unique to `base`; `None` when skipped.
async fn elector(base: &str) -> Option<ZkElector> {
    let elector = ZkElector::builder(common::zk_url()?)
        .root(common::unique_zk_root(base))
        .connect()
        .await
        .expect("connect to SHEDLOCK_TEST_ZK_URL");
    Some(elector)
}

/// `count` candidates in election `leader`, each on the one session of an elector under a root
/// unique to `base`.
async fn start(count: usize, base: &str) -> Option<(ZkElector, Candidates)> {
    let elector = elector(base).await?;
    let electors = (0..count).map(|_| Arc::new(elector.clone()) as Arc<dyn Elector>);
    let candidates = Candidates::start("leader", CONFIG, electors);
    Some((elector, candidates))
}

/// One leader, stable; a resignation hands over at once (no lease to wait for) to a candidate
/// with a greater term; terms strictly increase over every election.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_and_a_prompt_successor_on_resign() {
    let Some((_elector, candidates)) = start(3, "resign").await else {
        return;
    };
    let first = candidates.next_leader(None, CONFIG.lease_duration).await;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(candidates.leaders(), [first], "leadership must be stable");
    }
    let first_term = candidates.term(first);

    let resigned_at = Instant::now();
    candidates.election(first).resign().await;
    // The successor's watch fires on the deletion: no retry period, no session timeout.
    let second = candidates
        .next_leader(Some(first), CONFIG.renew_deadline)
        .await;
    let handover = candidates.elected_at(second) - resigned_at;
    assert!(candidates.term(second) > first_term, "terms must increase");
    println!("graceful handover took {handover:?}");

    candidates.election(second).resign().await;
    let third = candidates
        .next_leader(Some(second), CONFIG.renew_deadline)
        .await;
    candidates.assert_terms_increase();
    assert!(![first, second].contains(&third));
    candidates.resign_all().await;
}

/// A leader whose node is deleted behind its back (an operator, a bad script) steps down when
/// the deletion's notification reaches it (it watches its own node), and joins again at the end
/// of the line. The ensemble wakes its successor with the same transaction, so the two may
/// overlap for a notification's latency: deleting a leader's node by hand is outside what the
/// recipe keeps exclusive (terms still fence the successor's writes).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_whose_node_is_deleted_steps_down_and_joins_again() {
    let Some((elector, candidates)) = start(2, "deleted").await else {
        return;
    };
    let first = candidates.next_leader(None, CONFIG.lease_duration).await;
    let client = zookeeper_client::Client::connect(&common::zk_url().unwrap())
        .await
        .unwrap();
    let dir = elector.election_path("leader");
    let nodes = nodes_once(&client, &dir, 2).await;
    client
        .delete(&format!("{dir}/{}", nodes[0]), None)
        .await
        .unwrap();
    let second = 1 - first;
    let deadline = Instant::now() + CONFIG.retry_period * 4;
    while candidates.leaders() != [second] {
        assert!(Instant::now() < deadline, "{:?}", candidates.events());
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let revoked_first = candidates
        .events()
        .iter()
        .any(|e| matches!(*e, ElectionEvent::Revoked { who, .. } if who == first));
    assert!(revoked_first, "the former leader stepped down");
    candidates.assert_terms_increase();
    // It joined again with a new node, behind the new leader.
    let deadline = Instant::now() + CONFIG.lease_duration;
    loop {
        let mut again = client.list_children(&dir).await.unwrap();
        again.sort();
        if again.len() == 2 && !again.contains(&nodes[0]) {
            break;
        }
        assert!(Instant::now() < deadline, "did not join again: {again:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(candidates.leaders(), [second]);
    candidates.resign_all().await;
}

/// The candidates' nodes, sorted, once there are `count`.
async fn nodes_once(client: &zookeeper_client::Client, dir: &str, count: usize) -> Vec<String> {
    let deadline = Instant::now() + CONFIG.lease_duration;
    loop {
        let mut nodes = client.list_children(dir).await.unwrap();
        nodes.sort();
        if nodes.len() == count {
            return nodes;
        }
        assert!(Instant::now() < deadline, "{count} candidates: {nodes:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every candidate watches only the node just below its own (no herd effect): with four
/// candidates, the three lowest nodes carry one watch each from their successors, the leader's
/// node one more (the leader's own, for its deletion), and the election node none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_candidate_watches_only_its_predecessor() {
    let Some((elector, candidates)) = start(4, "herd").await else {
        return;
    };
    candidates.next_leader(None, CONFIG.lease_duration).await;
    let url = common::zk_url().unwrap();
    let client = zookeeper_client::Client::connect(&url).await.unwrap();
    let dir = elector.election_path("leader");
    let deadline = Instant::now() + CONFIG.lease_duration;
    let (nodes, watches) = loop {
        let mut nodes = client.list_children(&dir).await.unwrap();
        nodes.sort();
        let watches = watches_under(&url, &dir).await;
        if nodes.len() == 4 && watches.len() == 4 {
            break (nodes, watches);
        }
        assert!(
            Instant::now() < deadline,
            "nodes {nodes:?}, watched paths {watches:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let expected: Vec<String> = [0, 0, 1, 2]
        .iter()
        .map(|&i| format!("{dir}/{}", nodes[i]))
        .collect();
    assert_eq!(watches, expected, "each watch on a predecessor, once");
    candidates.resign_all().await;
}

/// Paths under `dir` watched on any server of the ensemble, one entry per watching session
/// (ZooKeeper's `wchp` command), sorted.
async fn watches_under(url: &str, dir: &str) -> Vec<String> {
    let mut watched = Vec::new();
    for server in url.split(',') {
        let Ok(mut stream) = tokio::net::TcpStream::connect(server).await else {
            continue;
        };
        stream.write_all(b"wchp").await.unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.unwrap();
        assert!(
            !reply.contains("not in the whitelist"),
            "enable wchp in 4lw.commands.whitelist (see .ci/zookeeper.sh): {reply}"
        );
        let mut path = None;
        for line in reply.lines() {
            if line.starts_with('/') {
                path = Some(line.trim().to_owned());
            } else if line.trim_start().starts_with("0x")
                && let Some(p) = &path
                && (p.starts_with(&format!("{dir}/")) || p == dir)
            {
                watched.push(p.clone());
            }
        }
    }
    watched.sort();
    watched
}

/// Bad timing and names are refused before any campaign starts, naming the field.
#[tokio::test]
async fn invalid_elections_name_their_field() {
    let Some(elector) = elector("invalid").await else {
        return;
    };
    let field = |result: Result<LeaderElection, Error>| match result {
        Err(Error::InvalidConfig { field, .. }) => field,
        other => panic!("expected InvalidConfig, got {other:?}"),
    };
    let huge = ElectionConfig {
        lease_duration: Duration::from_secs(30 * 24 * 3600),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_secs(2),
    };
    assert_eq!(
        field(
            LeaderElection::builder("batch", elector.clone())
                .config(huge)
                .start()
        ),
        "lease_duration"
    );
    assert_eq!(
        field(LeaderElection::builder("", elector.clone()).start()),
        "name"
    );
    let tight = ElectionConfig {
        renew_deadline: CONFIG.lease_duration,
        ..CONFIG
    };
    assert_eq!(
        field(
            LeaderElection::builder("batch", elector)
                .config(tight)
                .start()
        ),
        "lease_duration"
    );
}
