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

use std::time::Duration;

use shedlock::{ElectionConfig, EtcdLockProvider, LockConfiguration, LockProvider};
use shedlock_harness::{
    Event, Expectations, Fault, Fleet, Received, Report, Signal, ZkCandidateOptions, check, now_us,
};
use shedlock_test_support::{EtcdCluster, unique_key_prefix};

const EXE: &str = env!("CARGO_BIN_EXE_shedlock-harness");

/// Generous bound for anything that should take a few seconds.
const PATIENCE: Duration = Duration::from_secs(30);

/// A lease of 3 s (etcd's are whole seconds); the leader trusts its leadership 2 s after a
/// confirmed renewal.
const TIMING: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_millis(3_000),
    renew_deadline: Duration::from_millis(2_000),
    retry_period: Duration::from_millis(500),
};

/// The tests take turns: they stop members the others use.
static TURNS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Candidate processes in one election, the faults injected into them, and the cluster.
struct ElectionRun {
    cluster: EtcdCluster,
    fleet: Fleet,
    faults: Vec<Fault>,
}

impl ElectionRun {
    /// Three candidates under a fresh prefix, all ready; returns the one that leads.
    async fn start(name: &str) -> Option<(ElectionRun, usize)> {
        Self::start_as("etcd-candidate", name).await
    }

    /// The same with candidates of `subcommand` (`etcd-lock-candidate`: on lock leases).
    async fn start_as(subcommand: &str, name: &str) -> Option<(ElectionRun, usize)> {
        let cluster = EtcdCluster::from_env()?;
        cluster
            .wait_healthy(PATIENCE)
            .await
            .expect("the cluster is whole");
        let prefix = unique_key_prefix(name);
        let mut run = ElectionRun {
            cluster,
            fleet: Fleet::new(EXE),
            faults: Vec::new(),
        };
        for index in 0..3 {
            let options = ZkCandidateOptions {
                url: run.cluster.url.clone(),
                root: prefix.clone(),
                election: "leader".into(),
                holder: format!("candidate-{index}"),
                config: TIMING,
                act_every: Duration::from_millis(50),
            };
            let args = std::iter::once(subcommand.to_owned()).chain(options.to_args());
            let worker = run
                .fleet
                .spawn_args(args.collect())
                .expect("spawn a candidate");
            run.fleet
                .wait_ready(&[worker], PATIENCE)
                .await
                .expect("candidate ready");
        }
        let (leader, _, _) = run.elected(0, None).await;
        run.fleet.collect_for(TIMING.retry_period * 2).await;
        Some((run, leader))
    }

    /// The first election from event `since` on of a worker other than `not`:
    /// (worker, term, at).
    async fn elected(&mut self, since: usize, not: Option<usize>) -> (usize, u64, i64) {
        self.wait(since, "a leader", |r| match r.event {
            Event::Leader { term, at } if Some(r.worker) != not => Some((r.worker, term, at)),
            _ => None,
        })
        .await
    }

    async fn wait<T>(
        &mut self,
        since: usize,
        what: &str,
        matches: impl FnMut(&Received) -> Option<T>,
    ) -> T {
        match self.fleet.wait_for(since, PATIENCE, what, matches).await {
            Ok(found) => found,
            Err(error) => panic!("{error:#}\n{}", self.fleet.tail()),
        }
    }

    fn signal(&mut self, worker: usize, signal: Signal) {
        self.fleet.signal(worker, signal).expect("signal");
        if signal != Signal::Cont {
            let at = now_us();
            self.faults.push(Fault { worker, signal, at });
        }
    }

    /// Leader actions in `[from, to)`: (worker, term, at).
    fn leader_work(&self, from: i64, to: i64) -> Vec<(usize, u64, i64)> {
        let events = self.fleet.events();
        let work = events.iter().filter_map(|r| match r.event {
            Event::LeaderWork { term, at } if (from..to).contains(&at) => {
                Some((r.worker, term, at))
            }
            _ => None,
        });
        work.collect()
    }

    /// Stops the candidates and checks the whole run; panics unless it passed.
    async fn finish(mut self) -> Report {
        if let Err(error) = self.fleet.stop_all(PATIENCE).await {
            panic!("candidates did not stop cleanly: {error:#}");
        }
        let killed = self.fleet.killed();
        let mut report = check(
            self.fleet.events(),
            &[],
            &killed,
            &self.faults,
            &Expectations::default(),
        );
        for (worker, line) in self.fleet.unparsed() {
            report.violations.push(format!(
                "worker {worker} printed an unparsable line: {line}"
            ));
        }
        println!("{report}");
        assert!(report.passed(), "the run broke the rules:\n{report}");
        assert!(report.leader_work > 0, "nobody acted as leader: {report}");
        report
    }
}

fn ms_between(from: i64, to: i64) -> i64 {
    (to - from) / 1000
}

/// SIGKILL the leader: etcd deletes its key when its lease runs out (3 s) and the next
/// candidate leads then, never before; nobody acts on the dead leader's term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_leader_is_replaced_when_its_lease_runs_out() {
    killed_leader("etcd-candidate").await;
}

/// The same for a lock holder: candidates on `EtcdLockProvider` (a lease on the election's
/// lock, extended while leading); the killed holder's lock is taken when etcd ended its lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_lock_holder_is_replaced_when_its_lease_runs_out() {
    killed_leader("etcd-lock-candidate").await;
}

async fn killed_leader(subcommand: &str) {
    let _turn = TURNS.lock().await;
    let Some((mut run, leader)) = ElectionRun::start_as(subcommand, "etcd-killed").await else {
        return;
    };
    let since = run.fleet.events().len();
    run.signal(leader, Signal::Kill);
    let killed_at = now_us();
    let (successor, _, elected_at) = run.elected(since, Some(leader)).await;
    println!(
        "etcd ({subcommand}): leader killed; worker {successor} elected {} ms later (lease {} ms)",
        ms_between(killed_at, elected_at),
        TIMING.lease_duration.as_millis()
    );
    run.fleet.collect_for(TIMING.retry_period * 2).await;
    run.finish().await;
}

/// SIGSTOP the leader for about twice its lease: another is elected meanwhile; on SIGCONT the
/// former leader steps down before it acts again (its deadline passed while it was stopped).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_leader_does_not_act_after_resuming() {
    paused_leader("etcd-candidate").await;
}

/// The same for a lock holder paused past its lease: another takes the lock meanwhile; the
/// resumed holder's extension is refused and it does not act.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_lock_holder_does_not_act_after_resuming() {
    paused_leader("etcd-lock-candidate").await;
}

async fn paused_leader(subcommand: &str) {
    let _turn = TURNS.lock().await;
    let Some((mut run, leader)) = ElectionRun::start_as(subcommand, "etcd-paused").await else {
        return;
    };
    let since = run.fleet.events().len();
    run.signal(leader, Signal::Stop);
    let stopped_at = now_us();
    let (successor, _, elected_at) = run.elected(since, Some(leader)).await;
    run.fleet.collect_for(TIMING.lease_duration).await;
    let resumed_from = run.fleet.events().len();
    run.signal(leader, Signal::Cont);
    let resumed_at = now_us();
    run.wait(resumed_from, "the resumed leader to step down", |r| {
        (r.worker == leader && matches!(r.event, Event::Follower { .. })).then_some(())
    })
    .await;
    run.fleet.collect_for(Duration::from_secs(1)).await;
    let stale: Vec<_> = run
        .leader_work(resumed_at, now_us())
        .into_iter()
        .filter(|&(worker, _, _)| worker == leader)
        .collect();
    assert!(stale.is_empty(), "the resumed leader acted: {stale:?}");
    println!(
        "etcd ({subcommand}): leader paused; worker {successor} elected {} ms after the pause; the old leader stepped down on resuming",
        ms_between(stopped_at, elected_at)
    );
    run.finish().await;
}

/// Stop one member: the two others keep a quorum, candidates fail over to them, and a leader
/// keeps acting (the same one if its renewals got through in time). Never two at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn work_goes_on_when_one_member_stops() {
    let _turn = TURNS.lock().await;
    let Some((mut run, leader)) = ElectionRun::start("etcd-one-member").await else {
        return;
    };
    let provider = EtcdLockProvider::builder(run.cluster.url.as_str())
        .prefix(unique_key_prefix("etcd-one-member-locks"))
        .request_timeout(Duration::from_secs(1))
        .connect()
        .await
        .expect("connect a lock provider");
    let from = run.fleet.events().len();
    let stopped = run.cluster.stop(1).expect("stop member 1");
    let stopped_at = now_us();
    // Leader work after the stop, and locks that still work (a request to the stopped member
    // fails over to another).
    let (actor, _) = run
        .wait(from, "leader work after the stop", |r| match r.event {
            Event::LeaderWork { term, at } if at > stopped_at + 1_000_000 => Some((r.worker, term)),
            _ => None,
        })
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
    let kept = !run.fleet.events()[from..]
        .iter()
        .any(|r| matches!(r.event, Event::Follower { .. }));
    println!(
        "etcd: member 1 stopped; leader worker {leader} {}; worker {actor} acts; locks work",
        if kept {
            "kept leading"
        } else {
            "stepped down and a leader was elected again"
        }
    );
    stopped.start().expect("start member 1 again");
    run.cluster
        .wait_healthy(PATIENCE)
        .await
        .expect("whole again");
    run.fleet.collect_for(TIMING.retry_period * 2).await;
    run.finish().await;
}

/// Stop two of the three members: no quorum, so no renewal is confirmed; the leader steps
/// down at its deadline and nobody leads until a quorum is back; a lock provider's operations
/// fail with store errors within its request timeout. Then the members come back and a leader
/// is elected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_leader_anywhere_without_a_quorum() {
    let _turn = TURNS.lock().await;
    let Some((mut run, leader)) = ElectionRun::start("etcd-no-quorum").await else {
        return;
    };
    let provider = EtcdLockProvider::builder(run.cluster.url.as_str())
        .prefix(unique_key_prefix("etcd-no-quorum-locks"))
        .request_timeout(Duration::from_secs(1))
        .connect()
        .await
        .expect("connect a lock provider");
    let stops_began = now_us();
    let first = run.cluster.stop(1).expect("stop member 1");
    let second = run.cluster.stop(2).expect("stop member 2");
    let (outage_from, quorum_lost_at) = (run.fleet.events().len(), now_us());
    let leading_now = run.fleet.events()[..outage_from]
        .iter()
        .rev()
        .find_map(|r| match r.event {
            Event::Leader { .. } if r.worker == leader => Some(true),
            Event::Follower { .. } if r.worker == leader => Some(false),
            _ => None,
        })
        .unwrap_or(false);
    let stepped_down_at = if leading_now {
        run.wait(outage_from, "the leader to step down", |r| match r.event {
            Event::Follower { at } if r.worker == leader => Some(at),
            _ => None,
        })
        .await
    } else {
        now_us()
    };
    // Hold the outage a while longer: nobody may lead meanwhile.
    run.fleet.collect_for(TIMING.lease_duration).await;

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

    let restart_at = now_us();
    let elected: Vec<_> = run.fleet.events()[outage_from..]
        .iter()
        .filter(|r| matches!(r.event, Event::Leader { at, .. } if at > quorum_lost_at))
        .map(|r| r.worker)
        .collect();
    assert!(elected.is_empty(), "elected without a quorum: {elected:?}");
    let acts = run.leader_work(stepped_down_at, restart_at);
    assert!(acts.is_empty(), "leader work without a quorum: {acts:?}");

    let back_from = run.fleet.events().len();
    second.start().expect("start member 2 again");
    first.start().expect("start member 1 again");
    let (new_leader, _, elected_at) = run.elected(back_from, None).await;
    println!(
        "etcd: two members stopped; leader stepped down {} ms after the first stop began; nobody led for {} ms; worker {new_leader} elected {} ms after the restart",
        ms_between(stops_began, stepped_down_at),
        ms_between(stepped_down_at, restart_at),
        ms_between(restart_at, elected_at)
    );
    run.cluster
        .wait_healthy(PATIENCE)
        .await
        .expect("whole again");
    let lease = provider
        .acquire(&config)
        .await
        .expect("the lock works again")
        .expect("the lock is free");
    assert!(provider.release(&lease).await.expect("release"));
    run.finish().await;
}
