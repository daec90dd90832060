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

use std::time::Duration;

use shedlock::ElectionConfig;
use shedlock_harness::{
    Event, Expectations, Fault, Fleet, Received, Report, Signal, ZkCandidateOptions, check, now_us,
};
use shedlock_test_support::{Ensemble, ServerMode};

const EXE: &str = env!("CARGO_BIN_EXE_shedlock-harness");

/// Generous bound for anything that should take a few seconds.
const PATIENCE: Duration = Duration::from_secs(30);

/// Session timeout 3 s; the master trusts its leadership 2 s after a confirmed write.
const TIMING: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_millis(3_000),
    renew_deadline: Duration::from_millis(2_000),
    retry_period: Duration::from_millis(500),
};

/// The tests take turns: they stop servers the others use.
static TURNS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct ZkRun {
    ensemble: Ensemble,
    fleet: Fleet,
    faults: Vec<Fault>,
}

impl ZkRun {
    /// `candidates` candidate processes in a fresh root, all ready, one of them leading.
    async fn start(candidates: usize, name: &str) -> Option<(ZkRun, usize)> {
        let ensemble = Ensemble::from_env()?;
        wait_all_serving(&ensemble).await;
        let root = format!(
            "/shedlock-harness/{name}-{}-{}",
            std::process::id(),
            now_us()
        );
        let mut run = ZkRun {
            ensemble,
            fleet: Fleet::new(EXE),
            faults: Vec::new(),
        };
        for index in 0..candidates {
            let options = ZkCandidateOptions {
                url: run.ensemble.url.clone(),
                root: root.clone(),
                election: "master".into(),
                holder: format!("candidate-{index}"),
                config: TIMING,
                act_every: Duration::from_millis(50),
            };
            let mut args = vec!["zk-candidate".to_owned()];
            args.extend(options.to_args());
            let worker = run.fleet.spawn_args(args).expect("spawn a candidate");
            run.fleet
                .wait_ready(&[worker], PATIENCE)
                .await
                .expect("candidate ready");
        }
        let (master, _, _) = run.leader_after(0, None).await;
        // Every candidate has joined and watches its predecessor.
        run.fleet.collect_for(TIMING.retry_period * 2).await;
        Some((run, master))
    }

    /// The first `leader` line from index `since` on, by a worker other than `not`:
    /// (worker, term, at).
    async fn leader_after(&mut self, since: usize, not: Option<usize>) -> (usize, u64, i64) {
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

    fn inject(&mut self, worker: usize, signal: Signal) {
        self.fleet.signal(worker, signal).expect("signal");
        if signal != Signal::Cont {
            self.faults.push(Fault {
                worker,
                signal,
                at: now_us(),
            });
        }
    }

    /// `act` lines between two instants.
    fn acts_between(&self, from: i64, to: i64) -> Vec<(usize, u64, i64)> {
        self.fleet
            .events()
            .iter()
            .filter_map(|r| match r.event {
                Event::LeaderWork { term, at } if at >= from && at < to => {
                    Some((r.worker, term, at))
                }
                _ => None,
            })
            .collect()
    }

    /// Stops every candidate and checks the run; panics unless it passed.
    async fn finish(mut self) -> Report {
        if let Err(error) = self.fleet.stop_all(PATIENCE).await {
            panic!("candidates did not stop cleanly: {error:#}");
        }
        let mut report = check(
            self.fleet.events(),
            &[],
            &self.fleet.killed(),
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
        assert!(report.leader_work > 0, "nobody acted as master: {report}");
        report
    }
}

/// Waits until all three servers serve again (after an earlier test's restarts).
async fn wait_all_serving(ensemble: &Ensemble) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let mut modes = Vec::new();
        for server in Ensemble::SERVERS {
            modes.push(ensemble.mode(server).await);
        }
        if !modes.contains(&ServerMode::Down) {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the ensemble is not whole: {modes:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn ms(from: i64, to: i64) -> i64 {
    (to - from) / 1000
}

/// SIGKILL the master: the ensemble expires its session (3 s) and deletes its node; the next
/// candidate is elected then, never before, and nobody acts on the dead master's term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_master_is_replaced_when_its_session_expires() {
    let _turn = TURNS.lock().await;
    let Some((mut run, master)) = ZkRun::start(3, "killed").await else {
        return;
    };
    let since = run.fleet.events().len();
    run.inject(master, Signal::Kill);
    let killed_at = now_us();
    let (successor, _, elected_at) = run.leader_after(since, Some(master)).await;
    println!(
        "zookeeper: master killed; worker {successor} elected {} ms later (session timeout {} ms)",
        ms(killed_at, elected_at),
        TIMING.lease_duration.as_millis()
    );
    run.fleet.collect_for(TIMING.retry_period * 2).await;
    run.finish().await;
}

/// SIGSTOP the master for twice its session timeout: another is elected meanwhile; on SIGCONT
/// the former master steps down before it acts again (its deadline passed while it was stopped),
/// and never acts on its old term.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_master_does_not_act_after_resuming() {
    let _turn = TURNS.lock().await;
    let Some((mut run, master)) = ZkRun::start(3, "paused").await else {
        return;
    };
    let since = run.fleet.events().len();
    run.inject(master, Signal::Stop);
    let stopped_at = now_us();
    let (successor, _, elected_at) = run.leader_after(since, Some(master)).await;
    // Stopped for about twice the session timeout in all.
    run.fleet.collect_for(TIMING.lease_duration).await;
    let resumed_from = run.fleet.events().len();
    run.inject(master, Signal::Cont);
    let resumed_at = now_us();
    run.wait(resumed_from, "the resumed master to step down", |r| {
        (r.worker == master && matches!(r.event, Event::Follower { .. })).then_some(())
    })
    .await;
    run.fleet.collect_for(Duration::from_secs(1)).await;
    let stale: Vec<_> = run
        .acts_between(resumed_at, now_us())
        .into_iter()
        .filter(|&(worker, _, _)| worker == master)
        .collect();
    assert!(stale.is_empty(), "the resumed master acted: {stale:?}");
    println!(
        "zookeeper: master paused; worker {successor} elected {} ms after the pause; the old master stepped down on resuming, acted 0 times",
        ms(stopped_at, elected_at)
    );
    run.finish().await;
}

/// Stop the ensemble's own leader server: the two others elect a new one and the election goes
/// on; the master keeps leading if the ensemble was back within its 2 s of trust, otherwise it
/// steps down and a master is elected again once the ensemble serves. Never two at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn election_goes_on_when_the_ensemble_leader_stops() {
    let _turn = TURNS.lock().await;
    let Some((mut run, master)) = ZkRun::start(3, "zkleader").await else {
        return;
    };
    let zk_leader = run
        .ensemble
        .leader()
        .await
        .expect("the ensemble has a leader");
    let outage_from = run.fleet.events().len();
    // The stop returns once the server's process is gone (its shutdown takes a moment).
    let stopped_at = now_us();
    let stopped = run
        .ensemble
        .stop(zk_leader)
        .expect("stop the ensemble's leader");
    run.ensemble
        .wait_quorum(PATIENCE)
        .await
        .expect("two servers elect a leader");
    let quorum_at = now_us();
    // A master acts again once the ensemble serves (the same, or a newly elected one).
    let (actor, _) = run
        .wait(
            outage_from,
            "a master acting after the outage",
            |r| match r.event {
                Event::LeaderWork { term, at } if at > quorum_at => Some((r.worker, term)),
                _ => None,
            },
        )
        .await;
    let kept = !run.fleet.events()[outage_from..]
        .iter()
        .any(|r| matches!(r.event, Event::Follower { .. }));
    println!(
        "zookeeper: ensemble leader (server {zk_leader}) stopped; quorum again {} ms after the stop began; master worker {master} {}; worker {actor} acts",
        ms(stopped_at, quorum_at),
        if kept {
            "kept leading"
        } else {
            "stepped down and a master was elected again"
        },
    );
    stopped.start().expect("start the server again");
    wait_all_serving(&run.ensemble).await;
    run.fleet.collect_for(TIMING.retry_period * 2).await;
    run.finish().await;
}

/// Stop two of the three servers: no quorum, so no write is confirmed; the master steps down at
/// its deadline and nobody is master until a quorum is back; a lock provider's operations fail
/// with clear errors instead of waiting. Then the servers come back and a master is elected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_master_anywhere_without_a_quorum() {
    let _turn = TURNS.lock().await;
    let Some((mut run, master)) = ZkRun::start(3, "noquorum").await else {
        return;
    };
    let provider = shedlock::ZkLockProvider::builder(run.ensemble.url.as_str())
        .root("/shedlock-harness/noquorum-locks")
        .request_timeout(Duration::from_secs(1))
        .connect()
        .await
        .expect("connect a lock provider");
    provider.create_schema().await.expect("create the schema");

    let zk_leader = run
        .ensemble
        .leader()
        .await
        .expect("the ensemble has a leader");
    let other = Ensemble::SERVERS
        .into_iter()
        .find(|&s| s != zk_leader)
        .unwrap();
    let stopped_at = now_us();
    let first = run.ensemble.stop(zk_leader).expect("stop a server");
    // Stopping a server takes a while on a loaded host: meanwhile the other two elect a new
    // ensemble leader and serve, so a master may legitimately step down and be elected again.
    // The outage begins once the second server is gone.
    let second = run.ensemble.stop(other).expect("stop another server");
    let (outage_from, quorum_lost_at) = (run.fleet.events().len(), now_us());
    let leading_now = run.fleet.events()[..outage_from]
        .iter()
        .rev()
        .find_map(|r| match r.event {
            Event::Leader { .. } if r.worker == master => Some(true),
            Event::Follower { .. } if r.worker == master => Some(false),
            _ => None,
        })
        .unwrap_or(false);
    let stepped_down_at = if leading_now {
        run.wait(outage_from, "the master to step down", |r| match r.event {
            Event::Follower { at } if r.worker == master => Some(at),
            _ => None,
        })
        .await
    } else {
        now_us()
    };
    // Hold the outage a while longer: nobody may become master meanwhile.
    run.fleet.collect_for(TIMING.lease_duration).await;

    let config =
        shedlock::LockConfiguration::new("during_outage", Duration::from_secs(10), Duration::ZERO)
            .unwrap();
    let attempt = tokio::time::timeout(
        PATIENCE,
        shedlock::LockProvider::acquire(&provider, &config),
    )
    .await;
    match attempt {
        Ok(Err(shedlock::Error::Store { .. })) => {}
        other => panic!("acquire without a quorum must fail with a store error, got {other:?}"),
    }

    let restart_at = now_us();
    // Elections decided after the quorum was gone (a line printed late about an earlier one
    // does not count).
    let elected_during_outage: Vec<_> = run.fleet.events()[outage_from..]
        .iter()
        .filter(|r| matches!(r.event, Event::Leader { at, .. } if at > quorum_lost_at))
        .map(|r| r.worker)
        .collect();
    assert!(
        elected_during_outage.is_empty(),
        "elected without a quorum: {elected_during_outage:?}"
    );
    let acts = run.acts_between(stepped_down_at, restart_at);
    assert!(acts.is_empty(), "master work without a quorum: {acts:?}");

    let back_from = run.fleet.events().len();
    second.start().expect("start a server again");
    first.start().expect("start a server again");
    let (leader, _, elected_at) = run.leader_after(back_from, None).await;
    println!(
        "zookeeper: two servers stopped; master stepped down {} ms after the first stop began; no master for {} ms; worker {leader} elected {} ms after the restart",
        ms(stopped_at, stepped_down_at),
        ms(stepped_down_at, restart_at),
        ms(restart_at, elected_at)
    );
    wait_all_serving(&run.ensemble).await;
    // The provider's session comes back by itself once the ensemble serves again; until it
    // has, an attempt fails with a store error within the request timeout (never a hang, never
    // a wrong answer). The lock must work again within the patience.
    let deadline = tokio::time::Instant::now() + PATIENCE;
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
