//! Leader election on a real three-member etcd cluster, between separate processes
//! (`etcd-candidate` on `EtcdElector`, `etcd-lock-candidate` on the lock provider's leases),
//! under faults: the leader or lock holder SIGKILLed, SIGSTOPped past its lease, one member stopped (work goes on), two members stopped (no leader anywhere, clean
//! store errors, a leader again once they are back). Candidates act as leader every 50 ms,
//! asking `is_leader()` at that moment; the checker fails the run on two leaders at once or on
//! any leader action under a superseded term.
//!
//! Needs `SHEDLOCK_TEST_ETCD_URL` and `SHEDLOCK_TEST_ETCD_DIR` (`.ci/etcd.sh` exports both);
//! skipped without them, failed without them when `CI=true`. The tests stop and start members,
//! so they take turns (one lock), and a guard starts a stopped member again even when a test
//! fails.

mod common;

use std::time::Duration;

use shedlock::{LockConfiguration, LockProvider, etcd::EtcdLockProvider};
use shedlock_conformance::unique_key_prefix;
use shedlock_harness::now_us;
use shedlock_test_support::EtcdCluster;

use common::election::{ElectionRun, scenario_tests};

/// Three candidates of `subcommand` (`etcd-candidate` on `EtcdElector`, `etcd-lock-candidate`
/// on lock leases) under a fresh prefix, all ready, once it is this test's turn (the tests stop
/// members the others use); returns the run and the one that leads.
async fn start(subcommand: &str, name: &str) -> Option<(ElectionRun<EtcdCluster>, usize)> {
    let cluster = EtcdCluster::from_env()?;
    let prefix = unique_key_prefix(name);
    Some(ElectionRun::start(cluster, subcommand, &prefix).await)
}

/// The same with `etcd-candidate`s, and a lock provider of the test's own on the cluster
/// (request timeout 1 s).
async fn start_with_locks(
    name: &str,
) -> Option<(ElectionRun<EtcdCluster>, usize, EtcdLockProvider)> {
    let (run, leader) = start("etcd-candidate", name).await?;
    let provider = EtcdLockProvider::builder(run.cluster.url.as_str())
        .prefix(unique_key_prefix(&format!("{name}-locks")))
        .request_timeout(Duration::from_secs(1))
        .connect()
        .await
        .expect("connect a lock provider");
    Some((run, leader, provider))
}

scenario_tests! {
    /// SIGKILL the leader: etcd deletes its key when its lease runs out (3 s) and the next
    /// candidate leads then, never before; nobody acts on the dead leader's term.
    killed_leader_is_replaced_when_its_lease_runs_out:
        start("etcd-candidate", "etcd-killed") => kill_leader;
    /// The same for a lock holder: candidates on `EtcdLockProvider` (a lease on the election's
    /// lock, extended while leading); the killed holder's lock is taken when etcd ended its
    /// lease.
    killed_lock_holder_is_replaced_when_its_lease_runs_out:
        start("etcd-lock-candidate", "etcd-killed") => kill_leader;
    /// SIGSTOP the leader for about twice its lease: another is elected meanwhile; on SIGCONT
    /// the former leader steps down before it acts again (its deadline passed while it was
    /// stopped).
    paused_leader_does_not_act_after_resuming:
        start("etcd-candidate", "etcd-paused") => pause_leader;
    /// The same for a lock holder paused past its lease: another takes the lock meanwhile; the
    /// resumed holder's extension is refused and it does not act.
    paused_lock_holder_does_not_act_after_resuming:
        start("etcd-lock-candidate", "etcd-paused") => pause_leader;
}

/// Stop one member: the two others keep a quorum, candidates fail over to them, and a leader
/// keeps acting (the same one if its renewals got through in time). Never two at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_goes_on_when_one_member_stops() {
    let Some((mut run, leader, provider)) = start_with_locks("etcd-one-member").await else {
        return;
    };
    let from = run.fleet.events().len();
    let stopped = run.cluster.stop(1).expect("stop member 1");
    let stopped_at = now_us();
    // Leader work after the stop, and locks that still work (a request to the stopped member
    // fails over to another).
    let actor = run
        .acting_after(from, stopped_at + 1_000_000, "leader work after the stop")
        .await;
    let config =
        LockConfiguration::new("one-member", Duration::from_secs(10), Duration::ZERO).unwrap();
    for _ in 0..5 {
        let lease = provider
            .acquire(&config)
            .await
            .expect("acquire with one member down");
        let lease = lease.expect("free");
        assert!(
            provider
                .release(&lease)
                .await
                .expect("release with one member down")
        );
    }
    println!(
        "etcd: member 1 stopped; leader worker {leader} {}; worker {actor} acts; locks work",
        run.leadership_since(from)
    );
    run.node_back(|| stopped.start().expect("start member 1 again"))
        .await;
    run.finish().await;
}

/// Stop two of the three members: no quorum, so no renewal is confirmed; the leader steps
/// down at its deadline and nobody leads until a quorum is back; a lock provider's operations
/// fail with store errors within its request timeout. Then the members come back and a leader
/// is elected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_leader_anywhere_without_a_quorum() {
    let Some((mut run, leader, provider)) = start_with_locks("etcd-no-quorum").await else {
        return;
    };
    let stops_began = now_us();
    let first = run.cluster.stop(1).expect("stop member 1");
    let second = run.cluster.stop(2).expect("stop member 2");
    let outage = run.quorum_lost(leader, stops_began).await;

    let config =
        LockConfiguration::new("during-outage", Duration::from_secs(10), Duration::ZERO).unwrap();
    let asked = std::time::Instant::now();
    match provider.acquire(&config).await {
        Err(shedlock::Error::Store { .. }) => {}
        other => panic!("acquire without a quorum must fail with a store error, got {other:?}"),
    }
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "the error took {:?}",
        asked.elapsed()
    );

    run.quorum_back(outage, || {
        second.start().expect("start member 2 again");
        first.start().expect("start member 1 again");
    })
    .await;
    let lease = provider
        .acquire(&config)
        .await
        .expect("the lock works again")
        .expect("the lock is free");
    assert!(provider.release(&lease).await.expect("release"));
    run.finish().await;
}
