//! Leader election on the in-memory store with paused time.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Cuttable;
use shedlock_core::{ElectionConfig, Error, InMemoryLockProvider, LeaderState};
use shedlock_runtime::LeaderElection;
use tokio::time::Instant;

#[derive(Debug, Clone, PartialEq)]
enum Event {
    Elected { who: usize, term: u64, at: Duration },
    Revoked { who: usize, at: Duration },
}

struct Cluster {
    elections: Vec<LeaderElection>,
    cuts: Vec<Arc<AtomicBool>>,
    events: Arc<Mutex<Vec<Event>>>,
}

impl Cluster {
    fn start(size: usize) -> Self {
        let store = common::tokio_store();
        let events = Arc::new(Mutex::new(Vec::new()));
        let origin = Instant::now();
        let mut elections = Vec::new();
        let mut cuts = Vec::new();
        for who in 0..size {
            let cut = Arc::new(AtomicBool::new(false));
            let provider = Cuttable {
                inner: store.with_holder(format!("candidate-{who}")),
                cut: Arc::clone(&cut),
            };
            let (e1, e2) = (Arc::clone(&events), Arc::clone(&events));
            let election = LeaderElection::builder("leader", provider)
                .config(ElectionConfig::default())
                .on_elected(move |term| {
                    e1.lock().unwrap().push(Event::Elected {
                        who,
                        term,
                        at: origin.elapsed(),
                    })
                })
                .on_revoked(move || {
                    e2.lock().unwrap().push(Event::Revoked {
                        who,
                        at: origin.elapsed(),
                    })
                })
                .start()
                .unwrap();
            elections.push(election);
            cuts.push(cut);
        }
        Cluster {
            elections,
            cuts,
            events,
        }
    }

    fn leaders(&self) -> Vec<usize> {
        (0..self.elections.len())
            .filter(|&i| self.elections[i].is_leader())
            .collect()
    }

    fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }

    async fn wait_for_leader(&self, not: Option<usize>) -> (usize, Duration) {
        let started = Instant::now();
        loop {
            if let Some(&leader) = self.leaders().iter().find(|&&l| Some(l) != not) {
                return (leader, started.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Cuts the first leader from the store (its process stops talking to the store and never
    /// releases, as in a crash): that leader, the next one, and how long the next took.
    async fn cut_the_leader(&self) -> (usize, usize, Duration) {
        let (first, _) = self.wait_for_leader(None).await;
        self.cuts[first].store(true, Ordering::SeqCst);
        let (second, waited) = self.wait_for_leader(Some(first)).await;
        (first, second, waited)
    }
}

#[tokio::test(start_paused = true)]
async fn exactly_one_leader_at_every_observation() {
    let cluster = Cluster::start(3);
    for _ in 0..600 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            cluster.leaders().len() <= 1,
            "two leaders: {:?}",
            cluster.leaders()
        );
    }
    assert_eq!(cluster.leaders().len(), 1);
    let elected: Vec<Event> = cluster.events();
    assert_eq!(
        elected.len(),
        1,
        "leadership must be stable while the leader renews: {elected:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn graceful_resign_hands_over_at_once() {
    let cluster = Cluster::start(3);
    let (first, _) = cluster.wait_for_leader(None).await;
    let first_term = match cluster.elections[first].state() {
        LeaderState::Leader { term } => term,
        LeaderState::Follower => unreachable!(),
    };
    let resigned_at = Instant::now();
    cluster.elections[first].resign().await;
    let (second, _) = cluster.wait_for_leader(Some(first)).await;
    let handover = resigned_at.elapsed();
    assert!(
        handover < Duration::from_millis(100),
        "handover took {handover:?}: the release hint was not used"
    );
    let LeaderState::Leader { term } = cluster.elections[second].state() else {
        unreachable!()
    };
    assert!(term > first_term, "terms must increase");
    let events = cluster.events();
    assert!(
        matches!(events[1], Event::Revoked { who, .. } if who == first),
        "{events:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn leader_cut_from_the_store_steps_down_before_anyone_else_is_elected() {
    let cluster = Cluster::start(3);
    let (first, second, waited) = cluster.cut_the_leader().await;
    assert!(
        waited <= Duration::from_secs(15) + Duration::from_millis(2_400) + Duration::from_secs(2),
        "took {waited:?}"
    );
    let events = cluster.events();
    let revoked_at = events.iter().find_map(|e| match e {
        Event::Revoked { who, at } if *who == first => Some(*at),
        _ => None,
    });
    let elected_at = events.iter().find_map(|e| match e {
        Event::Elected { who, at, .. } if *who == second => Some(*at),
        _ => None,
    });
    let (revoked_at, elected_at) = (revoked_at.expect("revoked"), elected_at.expect("elected"));
    assert!(
        revoked_at < elected_at,
        "old leader still leading when the new one was elected: {events:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn crashed_leader_is_replaced_within_lease_plus_retry() {
    let cluster = Cluster::start(3);
    let (_, _, waited) = cluster.cut_the_leader().await;
    let bound = Duration::from_secs(15) + Duration::from_millis(2_400);
    assert!(waited <= bound, "takeover took {waited:?}, bound {bound:?}");
}

#[tokio::test]
async fn invalid_timing_is_rejected_naming_the_field() {
    let config = ElectionConfig {
        renew_deadline: Duration::from_secs(20),
        ..ElectionConfig::default()
    };
    let err = LeaderElection::builder("x", InMemoryLockProvider::new())
        .config(config)
        .start()
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::InvalidConfig {
                field: "lease_duration",
                ..
            }
        ),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_election_won_while_resigning_is_never_led() {
    let slow = common::Slow::new(common::tokio_store()).acquiring_for(Duration::from_secs(1));
    let acquiring = Arc::clone(&slow.acquiring);
    let store = slow.inner.clone();
    let elected = Arc::new(AtomicBool::new(false));
    let seen = Arc::clone(&elected);
    let election = LeaderElection::builder("leader", slow)
        .on_elected(move |_| seen.store(true, Ordering::SeqCst))
        .start()
        .unwrap();
    acquiring.notified().await; // the winning answer is on its way
    election.resign().await;
    assert!(!elected.load(Ordering::SeqCst), "led after resigning began");
    assert_eq!(election.state(), LeaderState::Follower);
    let config =
        shedlock_core::LockConfiguration::new("leader", Duration::from_secs(15), Duration::ZERO)
            .unwrap();
    assert!(
        shedlock_core::LockProvider::acquire(&store.with_holder("next"), &config)
            .await
            .unwrap()
            .is_some(),
        "the lease won while resigning was given back"
    );
}

/// The messages of warnings and errors logged on this thread while it is the default subscriber.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<String>>>);

impl tracing::Subscriber for Warnings {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::WARN
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = String::new();
        event.record(
            &mut |field: &tracing::field::Field, value: &dyn std::fmt::Debug| {
                if field.name() == "message" {
                    message = format!("{value:?}");
                }
            },
        );
        self.0.lock().unwrap().push(message);
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test(start_paused = true)]
async fn a_refused_release_at_resign_is_reported() {
    let warnings = Warnings::default();
    let _capture = tracing::subscriber::set_default(warnings.clone());
    let clock = Arc::new(shedlock_core::ManualClock::new(std::time::SystemTime::now()));
    let store = InMemoryLockProvider::new().with_clock(clock.clone());
    let election = LeaderElection::builder("leader", store.with_holder("a"))
        .start()
        .unwrap();
    election
        .subscribe()
        .wait_for(|state| *state != LeaderState::Follower)
        .await
        .unwrap();
    // The store's clock runs ahead: the lease expires there and another candidate takes it
    // while this one still trusts its renew deadline.
    clock.advance(Duration::from_secs(16));
    let config =
        shedlock_core::LockConfiguration::new("leader", Duration::from_secs(15), Duration::ZERO)
            .unwrap();
    shedlock_core::LockProvider::acquire(&store.with_holder("b"), &config)
        .await
        .unwrap()
        .expect("expired in the store");
    election.resign().await;
    let logged = warnings.0.lock().unwrap().clone();
    assert!(
        logged.iter().any(|m| m.contains("refused the release")),
        "{logged:?}"
    );
}
