//! What the election fault tests share (`etcd_faults.rs`, `zookeeper_faults.rs`): three candidate
//! processes in one election on a real three-node cluster, the faults injected into them, and
//! the checker's verdict on the whole run. The scenarios both stores go through (the leader
//! killed, paused, or left without a quorum) are here once; what only one store has stays in
//! its file.

use std::time::Duration;

use shedlock::ElectionConfig;
use shedlock_harness::{
    Event, Expectations, Fault, Fleet, Received, Report, Signal, ZkCandidateOptions, now_us,
};
use shedlock_test_support::{Ensemble, EtcdCluster};
use tokio::sync::{Mutex, MutexGuard};

use super::{EXE, inject, report};

/// Generous bound for anything that should take a few seconds.
pub(crate) const ELECTION_PATIENCE: Duration = Duration::from_secs(30);

/// Leases (etcd's are whole seconds) and sessions (ZooKeeper) of 3 s; the leader trusts its
/// leadership 2 s after a confirmed renewal.
pub(crate) const TIMING: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_millis(3_000),
    renew_deadline: Duration::from_millis(2_000),
    retry_period: Duration::from_millis(500),
};

/// The tests take turns: they stop nodes the others use.
static TURNS: Mutex<()> = Mutex::const_new(());

/// The test cluster an election runs on, and how the messages name its parts.
pub(crate) trait Cluster {
    /// The store.
    const STORE: &'static str;
    /// What the store calls a node (`member`, `server`).
    const NODE: &'static str;
    /// The election's name, and what the messages call its leader (ZooKeeper's tests say
    /// `master`: the ensemble has a leader of its own).
    const ROLE: &'static str;
    /// What ends a dead leader's leadership.
    const EXPIRY: &'static str;

    /// Where the candidates connect.
    fn url(&self) -> &str;

    /// Waits until every node serves (again, after an earlier test's stops); panics after the
    /// patience.
    async fn wait_whole(&self);
}

impl Cluster for EtcdCluster {
    const STORE: &'static str = "etcd";
    const NODE: &'static str = "member";
    const ROLE: &'static str = "leader";
    const EXPIRY: &'static str = "lease";

    fn url(&self) -> &str {
        &self.url
    }

    async fn wait_whole(&self) {
        self.wait_healthy(ELECTION_PATIENCE)
            .await
            .expect("the cluster is whole");
    }
}

impl Cluster for Ensemble {
    const STORE: &'static str = "zookeeper";
    const NODE: &'static str = "server";
    const ROLE: &'static str = "master";
    const EXPIRY: &'static str = "session timeout";

    fn url(&self) -> &str {
        &self.url
    }

    async fn wait_whole(&self) {
        self.wait_serving(ELECTION_PATIENCE)
            .await
            .expect("the ensemble is whole");
    }
}

/// Candidate processes in one election on `cluster`, and the faults injected into them. The
/// run holds the test's turn.
pub(crate) struct ElectionRun<C> {
    pub(crate) cluster: C,
    pub(crate) fleet: Fleet,
    faults: Vec<Fault>,
    /// The candidates' subcommand, for the messages.
    subcommand: String,
    _turn: MutexGuard<'static, ()>,
}

/// A quorum loss as the candidates saw it.
pub(crate) struct Outage {
    /// When the first node was stopped.
    stops_began: i64,
    /// The first event after the quorum was gone.
    from: usize,
    /// When it was gone.
    lost_at: i64,
    /// When the leader stepped down (when the quorum was lost, if it was not leading).
    stepped_down_at: i64,
}

impl<C: Cluster> ElectionRun<C> {
    /// Once it is this test's turn and `cluster` is whole: three candidates of `subcommand`
    /// (`zk-candidate`, `etcd-candidate`, `etcd-lock-candidate`) under `root`, all ready;
    /// returns the run and the candidate that leads.
    pub(crate) async fn start(cluster: C, subcommand: &str, root: &str) -> (Self, usize) {
        let turn = TURNS.lock().await;
        cluster.wait_whole().await;
        let mut run = ElectionRun {
            cluster,
            fleet: Fleet::new(EXE),
            faults: Vec::new(),
            subcommand: subcommand.to_owned(),
            _turn: turn,
        };
        for index in 0..3 {
            let options = ZkCandidateOptions {
                url: run.cluster.url().to_owned(),
                root: root.to_owned(),
                election: C::ROLE.into(),
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
                .wait_ready(&[worker], ELECTION_PATIENCE)
                .await
                .expect("candidate ready");
        }
        let (leader, _, _) = run.elected(0, None).await;
        // Every candidate has joined the election.
        run.fleet.collect_for(TIMING.retry_period * 2).await;
        (run, leader)
    }

    /// The store and the candidates, opening each message.
    fn label(&self) -> String {
        format!("{} ({})", C::STORE, self.subcommand)
    }

    /// The first election from event `since` on of a worker other than `not`:
    /// (worker, term, at).
    pub(crate) async fn elected(&mut self, since: usize, not: Option<usize>) -> (usize, u64, i64) {
        self.wait(since, "a leader", |r| match r.event {
            Event::Leader { term, at } if Some(r.worker) != not => Some((r.worker, term, at)),
            _ => None,
        })
        .await
    }

    /// Waits for the first event from index `since` that `matches` accepts.
    pub(crate) async fn wait<T>(
        &mut self,
        since: usize,
        what: &str,
        matches: impl FnMut(&Received) -> Option<T>,
    ) -> T {
        let found = self.fleet.wait_for(since, ELECTION_PATIENCE, what, matches);
        found.await.unwrap_or_else(|error| panic!("{error:#}"))
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

    /// Waits for leader work from event `since` on, done after `after`: the worker.
    pub(crate) async fn acting_after(&mut self, since: usize, after: i64, what: &str) -> usize {
        let (actor, _) = self
            .wait(since, what, |r| match r.event {
                Event::LeaderWork { term, at } if at > after => Some((r.worker, term)),
                _ => None,
            })
            .await;
        actor
    }

    /// What happened to the leader from event `since` on, for the messages: it kept leading,
    /// or it stepped down and one was elected again.
    pub(crate) fn leadership_since(&self, since: usize) -> String {
        let stepped_down = self.fleet.events()[since..]
            .iter()
            .any(|r| matches!(r.event, Event::Follower { .. }));
        if stepped_down {
            format!("stepped down and a {} was elected again", C::ROLE)
        } else {
            "kept leading".to_owned()
        }
    }

    /// After `restart` started a stopped node again: waits until the cluster is whole and the
    /// candidates had a moment on it.
    pub(crate) async fn node_back(&mut self, restart: impl FnOnce()) {
        restart();
        self.cluster.wait_whole().await;
        self.fleet.collect_for(TIMING.retry_period * 2).await;
    }

    /// SIGKILL the leader: the store ends its lease (session) and the next candidate is elected
    /// then, never before, and nobody acts on the dead leader's term. Checks the run.
    pub(crate) async fn kill_leader(mut self, leader: usize) -> Report {
        let since = self.fleet.events().len();
        inject(&mut self.fleet, &mut self.faults, leader, Signal::Kill);
        let killed_at = now_us();
        let (successor, _, elected_at) = self.elected(since, Some(leader)).await;
        println!(
            "{}: {} killed; worker {successor} elected {} ms later ({} {} ms)",
            self.label(),
            C::ROLE,
            ms_between(killed_at, elected_at),
            C::EXPIRY,
            TIMING.lease_duration.as_millis()
        );
        self.fleet.collect_for(TIMING.retry_period * 2).await;
        self.finish().await
    }

    /// SIGSTOP the leader until another is elected and a lease more (about twice its lease in
    /// all), then SIGCONT: it steps down before it acts again (its deadline passed while it was
    /// stopped), and never acts on its old term. Checks the run.
    pub(crate) async fn pause_leader(mut self, leader: usize) -> Report {
        let role = C::ROLE;
        let since = self.fleet.events().len();
        inject(&mut self.fleet, &mut self.faults, leader, Signal::Stop);
        let stopped_at = now_us();
        let (successor, _, elected_at) = self.elected(since, Some(leader)).await;
        self.fleet.collect_for(TIMING.lease_duration).await;
        let resumed_from = self.fleet.events().len();
        inject(&mut self.fleet, &mut self.faults, leader, Signal::Cont);
        let resumed_at = now_us();
        let what = format!("the resumed {role} to step down");
        self.wait(resumed_from, &what, |r| {
            (r.worker == leader && matches!(r.event, Event::Follower { .. })).then_some(())
        })
        .await;
        self.fleet.collect_for(Duration::from_secs(1)).await;
        let stale: Vec<_> = self
            .leader_work(resumed_at, now_us())
            .into_iter()
            .filter(|&(worker, _, _)| worker == leader)
            .collect();
        assert!(stale.is_empty(), "the resumed {role} acted: {stale:?}");
        println!(
            "{}: {role} paused; worker {successor} elected {} ms after the pause; the old {role} \
             stepped down on resuming, acted 0 times",
            self.label(),
            ms_between(stopped_at, elected_at)
        );
        self.finish().await
    }

    /// Called once two nodes are stopped (the first at `stops_began`), the quorum gone: waits
    /// for `leader` to step down (at its deadline) if it was leading, then holds the outage a
    /// lease longer; nobody may lead meanwhile.
    pub(crate) async fn quorum_lost(&mut self, leader: usize, stops_began: i64) -> Outage {
        let (from, lost_at) = (self.fleet.events().len(), now_us());
        let leading_now = self.fleet.events()[..from]
            .iter()
            .rev()
            .find_map(|r| match r.event {
                Event::Leader { .. } if r.worker == leader => Some(true),
                Event::Follower { .. } if r.worker == leader => Some(false),
                _ => None,
            })
            .unwrap_or(false);
        let stepped_down_at = if leading_now {
            let what = format!("the {} to step down", C::ROLE);
            self.wait(from, &what, |r| match r.event {
                Event::Follower { at } if r.worker == leader => Some(at),
                _ => None,
            })
            .await
        } else {
            now_us()
        };
        self.fleet.collect_for(TIMING.lease_duration).await;
        Outage {
            stops_began,
            from,
            lost_at,
            stepped_down_at,
        }
    }

    /// Ends `outage`: checks that nobody was elected during it (an election decided after the
    /// quorum was gone; a line printed late about an earlier one does not count) and nobody
    /// acted as leader from the step-down on; then `restart` starts the nodes again, a leader
    /// must be elected and the cluster become whole.
    pub(crate) async fn quorum_back(&mut self, outage: Outage, restart: impl FnOnce()) {
        let restart_at = now_us();
        let elected: Vec<_> = self.fleet.events()[outage.from..]
            .iter()
            .filter(|r| matches!(r.event, Event::Leader { at, .. } if at > outage.lost_at))
            .map(|r| r.worker)
            .collect();
        assert!(elected.is_empty(), "elected without a quorum: {elected:?}");
        let acts = self.leader_work(outage.stepped_down_at, restart_at);
        assert!(
            acts.is_empty(),
            "{} work without a quorum: {acts:?}",
            C::ROLE
        );

        let back_from = self.fleet.events().len();
        restart();
        let (leader, _, elected_at) = self.elected(back_from, None).await;
        println!(
            "{}: two {}s stopped; {} stepped down {} ms after the first stop began; nobody led \
             for {} ms; worker {leader} elected {} ms after the restart",
            self.label(),
            C::NODE,
            C::ROLE,
            ms_between(outage.stops_began, outage.stepped_down_at),
            ms_between(outage.stepped_down_at, restart_at),
            ms_between(restart_at, elected_at)
        );
        self.cluster.wait_whole().await;
    }

    /// Stops the candidates and checks the whole run; panics unless it passed and somebody acted
    /// as leader.
    pub(crate) async fn finish(mut self) -> Report {
        if let Err(error) = self.fleet.stop_all(ELECTION_PATIENCE).await {
            panic!("candidates did not stop cleanly: {error:#}");
        }
        let report = report(&self.fleet, &[], &self.faults, &Expectations::default());
        assert!(report.passed(), "the run broke the rules:\n{report}");
        let role = C::ROLE;
        assert!(report.leader_work > 0, "nobody acted as {role}: {report}");
        report
    }
}

/// Tests that each run one of `ElectionRun`'s scenarios (`kill_leader`, `pause_leader`) on the
/// candidates `start` brings up, skipped when it brings up none (no cluster configured).
#[allow(unused_macros)] // the binaries of the other tests include this module too
macro_rules! scenario_tests {
    ($($(#[$doc:meta])* $name:ident: $start:expr => $scenario:ident;)*) => {
        $(
            $(#[$doc])*
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $name() {
                if let Some((run, leader)) = $start.await {
                    run.$scenario(leader).await;
                }
            }
        )*
    };
}
#[allow(unused_imports)]
pub(crate) use scenario_tests;

/// Milliseconds from `from` to `to` (µs).
pub(crate) fn ms_between(from: i64, to: i64) -> i64 {
    (to - from) / 1000
}
