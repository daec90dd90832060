//! Leader election over a real store, as a reusable scenario: three candidates, each with an
//! [`Elector`] of its own and a way to cut it off from the store, and
//! [`leader_handover`] checking exclusivity, handover on resignation, a cut leader stepping
//! down before anyone else is elected, and terms that only grow. [`Candidates`] carries the
//! observation helpers for a store's own election tests.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::time::Instant;

use shedlock_core::{ElectionConfig, Elector, LeaderState};
use shedlock_runtime::LeaderElection;

type CutFn = Box<dyn Fn() -> BoxFuture<'static, ()> + Send + Sync>;

/// One candidate: its elector, and how to cut it off from the store (close its connections,
/// cut its proxy).
pub struct Candidate {
    elector: Arc<dyn Elector>,
    cut: CutFn,
}

impl Candidate {
    /// A candidate campaigning through `elector`; `cut` cuts it off from the store.
    pub fn new<F>(elector: Arc<dyn Elector>, cut: impl Fn() -> F + Send + Sync + 'static) -> Self
    where
        F: Future<Output = ()> + Send + 'static,
    {
        Candidate {
            elector,
            cut: Box::new(move || Box::pin(cut())),
        }
    }
}

impl fmt::Debug for Candidate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Candidate")
            .field("elector", &self.elector)
            .finish_non_exhaustive()
    }
}

/// What the candidates' callbacks reported, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElectionEvent {
    /// `on_elected` ran for candidate `who`.
    Elected {
        /// The candidate's index.
        who: usize,
        /// The term it was elected for.
        term: u64,
        /// When the callback ran.
        at: Instant,
    },
    /// `on_revoked` ran for candidate `who`.
    Revoked {
        /// The candidate's index.
        who: usize,
        /// When the callback ran.
        at: Instant,
    },
}

/// Candidates campaigning in one election, with their callbacks recorded.
pub struct Candidates {
    elections: Vec<LeaderElection>,
    cuts: Vec<Option<CutFn>>,
    events: Arc<Mutex<Vec<ElectionEvent>>>,
}

impl fmt::Debug for Candidates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Candidates")
            .field("elections", &self.elections)
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

impl Candidates {
    /// Starts one [`LeaderElection`] named `election` per elector, with `config`.
    ///
    /// # Panics
    /// When an election refuses to start (a bad name or configuration).
    pub fn start(
        election: &str,
        config: ElectionConfig,
        electors: impl IntoIterator<Item = Arc<dyn Elector>>,
    ) -> Self {
        Self::start_with_cuts(
            election,
            config,
            electors.into_iter().map(|elector| (elector, None)),
        )
    }

    fn start_with_cuts(
        election: &str,
        config: ElectionConfig,
        candidates: impl IntoIterator<Item = (Arc<dyn Elector>, Option<CutFn>)>,
    ) -> Self {
        let events = Arc::new(Mutex::new(Vec::new()));
        let mut elections = Vec::new();
        let mut cuts = Vec::new();
        for (who, (elector, cut)) in candidates.into_iter().enumerate() {
            let (elected, revoked) = (Arc::clone(&events), Arc::clone(&events));
            let started = LeaderElection::builder_shared(election, elector)
                .config(config)
                .on_elected(move |term| {
                    let at = Instant::now();
                    elected
                        .lock()
                        .unwrap()
                        .push(ElectionEvent::Elected { who, term, at });
                })
                .on_revoked(move || {
                    let at = Instant::now();
                    revoked
                        .lock()
                        .unwrap()
                        .push(ElectionEvent::Revoked { who, at });
                })
                .start()
                .expect("the election starts");
            elections.push(started);
            cuts.push(cut);
        }
        Candidates {
            elections,
            cuts,
            events,
        }
    }

    /// Candidate `who`'s election.
    pub fn election(&self, who: usize) -> &LeaderElection {
        &self.elections[who]
    }

    /// The candidates that say they lead, now.
    pub fn leaders(&self) -> Vec<usize> {
        (0..self.elections.len())
            .filter(|&i| self.elections[i].is_leader())
            .collect()
    }

    /// The callbacks so far, in order.
    pub fn events(&self) -> Vec<ElectionEvent> {
        self.events.lock().unwrap().clone()
    }

    /// Waits, at most `within`, for a leader other than `not`, checking on the way that there
    /// is never more than one.
    ///
    /// # Panics
    /// On two leaders at once, or none other than `not` within `within`.
    pub async fn next_leader(&self, not: Option<usize>, within: Duration) -> usize {
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
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// The term candidate `who` leads in.
    ///
    /// # Panics
    /// When it does not lead.
    pub fn term(&self, who: usize) -> u64 {
        match self.elections[who].state() {
            LeaderState::Leader { term } => term,
            LeaderState::Follower => panic!("candidate {who} does not lead"),
        }
    }

    /// When `on_elected` last ran for `who`.
    ///
    /// # Panics
    /// When it never ran.
    pub fn elected_at(&self, who: usize) -> Instant {
        self.events()
            .iter()
            .rev()
            .find_map(|e| match *e {
                ElectionEvent::Elected { who: w, at, .. } if w == who => Some(at),
                _ => None,
            })
            .expect("on_elected ran")
    }

    /// When `on_revoked` first ran for `who`.
    ///
    /// # Panics
    /// When it never ran.
    pub fn revoked_at(&self, who: usize) -> Instant {
        self.events()
            .iter()
            .find_map(|e| match *e {
                ElectionEvent::Revoked { who: w, at } if w == who => Some(at),
                _ => None,
            })
            .expect("on_revoked ran")
    }

    /// Checks that terms strictly increased over every election so far.
    ///
    /// # Panics
    /// When they did not.
    pub fn assert_terms_increase(&self) {
        let terms: Vec<u64> = self
            .events()
            .iter()
            .filter_map(|e| match *e {
                ElectionEvent::Elected { term, .. } => Some(term),
                ElectionEvent::Revoked { .. } => None,
            })
            .collect();
        assert!(terms.windows(2).all(|w| w[0] < w[1]), "terms {terms:?}");
    }

    /// Cuts candidate `who` off from the store.
    ///
    /// # Panics
    /// When the candidate was started without a way to cut it.
    pub async fn cut(&self, who: usize) {
        let cut = self.cuts[who]
            .as_ref()
            .expect("a candidate that can be cut");
        cut().await;
    }

    /// Every candidate resigns.
    pub async fn resign_all(&self) {
        for election in &self.elections {
            election.resign().await;
        }
    }
}

/// The scenario every store's election passes, with three (or more) `candidates` and `config`
/// (whose lease the store can wait out a few times):
/// - one leader is elected, and stays the only one and the same while it renews;
/// - it resigns: another is elected within about one retry period, with a greater term;
/// - that leader is cut off from the store: it steps down (`on_revoked`) before another is
///   elected, with a greater term; terms strictly increase over every election.
///
/// `label` names the store in failure messages. Prints the graceful handover's time.
///
/// # Panics
/// When any of those does not hold.
pub async fn leader_handover(label: &str, config: ElectionConfig, candidates: Vec<Candidate>) {
    assert!(candidates.len() >= 3, "the scenario needs three candidates");
    let candidates = Candidates::start_with_cuts(
        "leader",
        config,
        candidates.into_iter().map(|c| (c.elector, Some(c.cut))),
    );
    let first = candidates
        .next_leader(None, config.lease_duration * 2)
        .await;
    for _ in 0..40 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(
            candidates.leaders(),
            [first],
            "{label}: leadership must be exclusive and stable"
        );
    }
    let first_term = candidates.term(first);

    let resigned_at = Instant::now();
    candidates.election(first).resign().await;
    let second = candidates
        .next_leader(
            Some(first),
            config.retry_period.mul_f64(1.2) + Duration::from_millis(300),
        )
        .await;
    eprintln!("{label}: graceful handover in {:?}", resigned_at.elapsed());
    let second_term = candidates.term(second);
    assert!(second_term > first_term, "{label}: terms must increase");

    candidates.cut(second).await;
    let third = candidates
        .next_leader(
            Some(second),
            config.lease_duration + config.retry_period * 3,
        )
        .await;
    assert!(
        candidates.term(third) > second_term,
        "{label}: terms must increase"
    );
    assert!(
        candidates.revoked_at(second) < candidates.elected_at(third),
        "{label}: the cut leader still led when the next was elected: {:?}",
        candidates.events()
    );
    candidates.assert_terms_increase();
    candidates.resign_all().await;
}
