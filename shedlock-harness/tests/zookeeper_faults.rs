//! Leader election on a real three-server ZooKeeper ensemble, between separate processes
//! (`zk-candidate`), under faults: the master SIGKILLed, the master SIGSTOPped past its session
//! timeout, the ensemble's own leader server stopped, and two of the three servers stopped.
//! Candidates act as master every 50 ms, asking `is_leader()` at that moment; the checker fails
//! the run on two masters at once or on any master action under a superseded term.
//!
//! Needs `SHEDLOCK_TEST_ZK_URL` and `SHEDLOCK_TEST_ZK_DIR` (`.ci/zookeeper.sh` exports both);
//! skipped without them, failed without them when `CI=true`. The tests stop and start the
//! ensemble's servers, so they take turns (one lock), and a guard starts a stopped server again
//! even when a test fails.

mod common;

use std::time::Duration;

use shedlock_harness::now_us;
use shedlock_test_support::Ensemble;

use common::election::{ELECTION_PATIENCE, ElectionRun, ms_between, scenario_tests};

/// Three `zk-candidate` processes in a fresh root, all ready, once it is this test's turn (the
/// tests stop servers the others use); returns the run and the one that leads (the master).
async fn start(name: &str) -> Option<(ElectionRun<Ensemble>, usize)> {
    let ensemble = Ensemble::from_env()?;
    let root = format!(
        "/shedlock-harness/{name}-{}-{}",
        std::process::id(),
        now_us()
    );
    Some(ElectionRun::start(ensemble, "zk-candidate", &root).await)
}

scenario_tests! {
    /// SIGKILL the master: the ensemble expires its session (3 s) and deletes its node; the
    /// next candidate is elected then, never before, and nobody acts on the dead master's term.
    killed_master_is_replaced_when_its_session_expires: start("killed") => kill_leader;
    /// SIGSTOP the master for twice its session timeout: another is elected meanwhile; on
    /// SIGCONT the former master steps down before it acts again (its deadline passed while it
    /// was stopped), and never acts on its old term.
    paused_master_does_not_act_after_resuming: start("paused") => pause_leader;
}

/// Stop the ensemble's own leader server: the two others elect a new one and the election goes
/// on; the master keeps leading if the ensemble was back within its 2 s of trust, otherwise it
/// steps down and a master is elected again once the ensemble serves. Never two at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_goes_on_when_the_ensemble_leader_stops() {
    let Some((mut run, master)) = start("zkleader").await else {
        return;
    };
    let zk_leader = run
        .cluster
        .leader()
        .await
        .expect("the ensemble has a leader");
    let outage_from = run.fleet.events().len();
    // The stop returns once the server's process is gone (its shutdown takes a moment).
    let stopped_at = now_us();
    let stopped = run
        .cluster
        .stop(zk_leader)
        .expect("stop the ensemble's leader");
    run.cluster
        .wait_quorum(ELECTION_PATIENCE)
        .await
        .expect("two servers elect a leader");
    let quorum_at = now_us();
    // A master acts again once the ensemble serves (the same, or a newly elected one).
    let actor = run
        .acting_after(outage_from, quorum_at, "a master acting after the outage")
        .await;
    println!(
        "zookeeper: ensemble leader (server {zk_leader}) stopped; quorum again {} ms after the stop began; master worker {master} {}; worker {actor} acts",
        ms_between(stopped_at, quorum_at),
        run.leadership_since(outage_from),
    );
    run.node_back(|| stopped.start().expect("start the server again"))
        .await;
    run.finish().await;
}

/// Stop two of the three servers: no quorum, so no write is confirmed; the master steps down at
/// its deadline and nobody is master until a quorum is back; a lock provider's operations fail
/// with clear errors instead of waiting. Then the servers come back and a master is elected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_master_anywhere_without_a_quorum() {
    let Some((mut run, master)) = start("noquorum").await else {
        return;
    };
    let provider = shedlock::zookeeper::ZkLockProvider::builder(run.cluster.url.as_str())
        .root("/shedlock-harness/noquorum-locks")
        .request_timeout(Duration::from_secs(1))
        .connect()
        .await
        .expect("connect a lock provider");
    provider.create_schema().await.expect("create the schema");

    let zk_leader = run
        .cluster
        .leader()
        .await
        .expect("the ensemble has a leader");
    let other = Ensemble::SERVERS
        .into_iter()
        .find(|&s| s != zk_leader)
        .unwrap();
    let stops_began = now_us();
    let first = run.cluster.stop(zk_leader).expect("stop a server");
    // Stopping a server takes a while on a loaded host: meanwhile the other two elect a new
    // ensemble leader and serve, so a master may legitimately step down and be elected again.
    // The outage begins once the second server is gone.
    let second = run.cluster.stop(other).expect("stop another server");
    let outage = run.quorum_lost(master, stops_began).await;

    let config =
        shedlock::LockConfiguration::new("during_outage", Duration::from_secs(10), Duration::ZERO)
            .unwrap();
    let attempt = tokio::time::timeout(
        ELECTION_PATIENCE,
        shedlock::LockProvider::acquire(&provider, &config),
    )
    .await;
    match attempt {
        Ok(Err(shedlock::Error::Store { .. })) => {}
        other => panic!("acquire without a quorum must fail with a store error, got {other:?}"),
    }

    run.quorum_back(outage, || {
        second.start().expect("start a server again");
        first.start().expect("start a server again");
    })
    .await;
    // The provider's session comes back by itself once the ensemble serves again; until it
    // has, an attempt fails with a store error within the request timeout (never a hang, never
    // a wrong answer). The lock must work again within the patience.
    let deadline = tokio::time::Instant::now() + ELECTION_PATIENCE;
    let mut errors = Vec::new();
    loop {
        match shedlock::LockProvider::acquire(&provider, &config).await {
            Ok(Some(_)) => break,
            Ok(None) => panic!("the lock is free, yet it was refused"),
            Err(error) if tokio::time::Instant::now() < deadline => {
                errors.push(error.to_string());
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(error) => panic!("the lock never worked again: {errors:?}, then {error}"),
        }
    }
    println!(
        "zookeeper: the lock worked again after {} store errors while the session came back",
        errors.len()
    );
    run.finish().await;
}
