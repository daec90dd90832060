//! Leader election against real databases: three candidates, each on its own connections.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{Db, Provider};
use shedlock::{ElectionConfig, LeaderElection, LeaderState};
use tokio::time::Instant;

const CONFIG: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_millis(2_000),
    renew_deadline: Duration::from_millis(1_500),
    retry_period: Duration::from_millis(400),
};

#[derive(Debug, Clone, Copy)]
enum Event {
    Elected { who: usize, term: u64, at: Instant },
    Revoked { who: usize, at: Instant },
}

struct Candidates {
    providers: Vec<Provider>,
    elections: Vec<LeaderElection>,
    events: Arc<Mutex<Vec<Event>>>,
}

impl Candidates {
    async fn start(db: Db) -> Option<Self> {
        let first = common::provider(db, "candidate-0").await?;
        let mut providers = vec![first.clone()];
        for who in 1..3 {
            providers.push(common::another_instance(&first, &format!("candidate-{who}")).await);
        }
        let events = Arc::new(Mutex::new(Vec::new()));
        let elections = providers
            .iter()
            .enumerate()
            .map(|(who, provider)| {
                let (elected, revoked) = (Arc::clone(&events), Arc::clone(&events));
                LeaderElection::builder("leader", provider.shared())
                    .config(CONFIG)
                    .on_elected(move |term| {
                        elected.lock().unwrap().push(Event::Elected {
                            who,
                            term,
                            at: Instant::now(),
                        })
                    })
                    .on_revoked(move || {
                        revoked.lock().unwrap().push(Event::Revoked {
                            who,
                            at: Instant::now(),
                        })
                    })
                    .start()
                    .unwrap()
            })
            .collect();
        Some(Candidates {
            providers,
            elections,
            events,
        })
    }

    fn leaders(&self) -> Vec<usize> {
        (0..3).filter(|&i| self.elections[i].is_leader()).collect()
    }

    fn events(&self) -> Vec<Event> {
        self.events.lock().unwrap().clone()
    }

    /// Waits (bounded) for a leader other than `not`, checking there is never more than one.
    async fn next_leader(&self, not: Option<usize>, within: Duration) -> usize {
        let deadline = Instant::now() + within;
        loop {
            let leaders = self.leaders();
            assert!(leaders.len() <= 1, "two leaders at once: {leaders:?}");
            if let Some(&leader) = leaders.iter().find(|&&l| Some(l) != not) {
                return leader;
            }
            assert!(
                Instant::now() < deadline,
                "no new leader within {within:?}: {:?}",
                self.events()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    fn term(&self, who: usize) -> u64 {
        match self.elections[who].state() {
            LeaderState::Leader { term } => term,
            LeaderState::Follower => panic!("candidate {who} does not lead"),
        }
    }
}

async fn election(db: Db) {
    let Some(candidates) = Candidates::start(db).await else {
        return;
    };

    // One leader, stable, and never two at once.
    let first = candidates.next_leader(None, CONFIG.lease_duration).await;
    for _ in 0..60 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            candidates.leaders(),
            [first],
            "{db:?}: leadership must be exclusive and stable"
        );
    }
    let first_term = candidates.term(first);

    // Graceful resign: another candidate leads within one retry period (on PostgreSQL, at once).
    candidates.elections[first].resign().await;
    let second = candidates
        .next_leader(
            Some(first),
            CONFIG.retry_period.mul_f64(1.2) + Duration::from_millis(300),
        )
        .await;
    let second_term = candidates.term(second);
    assert!(second_term > first_term, "{db:?}: terms must increase");

    // The leader's connections are cut: it steps down before anyone else is elected.
    candidates.providers[second].close().await;
    let third = candidates
        .next_leader(
            Some(second),
            CONFIG.lease_duration + CONFIG.retry_period * 3,
        )
        .await;
    assert!(
        candidates.term(third) > second_term,
        "{db:?}: terms must increase"
    );
    let events = candidates.events();
    let revoked_at = events.iter().find_map(|e| match *e {
        Event::Revoked { who, at } if who == second => Some(at),
        _ => None,
    });
    let elected_at = events.iter().rev().find_map(|e| match *e {
        Event::Elected { who, at, .. } if who == third => Some(at),
        _ => None,
    });
    let (revoked_at, elected_at) = (
        revoked_at.expect("on_revoked ran"),
        elected_at.expect("on_elected ran"),
    );
    assert!(
        revoked_at < elected_at,
        "{db:?}: the cut leader still led when the next was elected: {events:?}"
    );
    let terms: Vec<u64> = events
        .iter()
        .filter_map(|e| match *e {
            Event::Elected { term, .. } => Some(term),
            Event::Revoked { .. } => None,
        })
        .collect();
    assert!(
        terms.windows(2).all(|w| w[0] < w[1]),
        "{db:?}: terms {terms:?}"
    );
    candidates.elections[third].resign().await;
    candidates.providers[third].remove_store().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_election() {
    election(Db::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_election() {
    election(Db::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_election() {
    election(Db::MySql).await;
}
