//! A candidate's standing in one election: electors report to it; jobs and callers read it at
//! the moment they act, against its monotonic deadline.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;
use tokio::time::Instant;

use super::{ElectionConfig, LeaderState};

/// Called with the term when a candidate becomes leader.
pub type ElectedFn = Arc<dyn Fn(u64) + Send + Sync>;
/// Called when a candidate stops leading.
pub type RevokedFn = Arc<dyn Fn() + Send + Sync>;

/// This instance's standing in one election, shared by the elector that campaigns and by
/// everything that asks "do I lead?".
///
/// Leadership is trusted until a deadline on this process's monotonic clock, which the elector
/// sets when it is elected and moves at every confirmed renewal. [`is_leader`](Self::is_leader)
/// and [`state`](Self::state) compare with that deadline when they are called, so a process
/// that resumes after a pause (a stopped container, a long GC-like stall) learns that it no
/// longer leads before it can act, whatever its election task last wrote. When the deadline
/// passes, the candidacy steps down by itself: `on_revoked` runs and
/// [`term_ended`](Self::term_ended) completes.
///
/// A runtime (`shedlock-runtime`'s `LeaderElection`) creates one per candidate;
/// [`Elector`](super::Elector) implementations receive it.
#[derive(Clone)]
pub struct Candidacy {
    inner: Arc<Inner>,
}

struct Inner {
    election: Arc<str>,
    config: ElectionConfig,
    standing: Mutex<Standing>,
    watch: watch::Sender<LeaderState>,
    on_elected: Option<ElectedFn>,
    on_revoked: Option<RevokedFn>,
}

#[derive(Debug, Clone, Copy)]
enum Standing {
    Follower,
    Leader { term: u64, valid_until: Instant },
}

impl Candidacy {
    /// A follower's standing in `election`, campaigning with `config`: what a runtime creates
    /// per candidate (and an elector's own tests). `on_elected` runs with the term when it
    /// becomes leader, `on_revoked` when it stops leading, once per term.
    pub fn new(
        election: &str,
        config: ElectionConfig,
        on_elected: Option<ElectedFn>,
        on_revoked: Option<RevokedFn>,
    ) -> Self {
        Candidacy {
            inner: Arc::new(Inner {
                election: election.into(),
                config,
                standing: Mutex::new(Standing::Follower),
                watch: watch::channel(LeaderState::Follower).0,
                on_elected,
                on_revoked,
            }),
        }
    }

    fn standing(&self) -> MutexGuard<'_, Standing> {
        self.inner
            .standing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// The election's name.
    pub fn election(&self) -> &str {
        &self.inner.election
    }

    /// The election's timing, as the [`Elector`](super::Elector) checked it before campaigning.
    pub fn config(&self) -> &ElectionConfig {
        &self.inner.config
    }

    /// Reports that this candidate now leads with `term` (strictly greater than every earlier
    /// term of the election), trusted until `valid_until` unless renewed. Runs `on_elected`.
    ///
    /// Returns `false`, and changes nothing, when `valid_until` has already passed: the answer
    /// that made this candidate leader came too late to act on. Electing again while leading
    /// replaces the term after stepping down from the old one.
    pub fn elected(&self, term: u64, valid_until: Instant) -> bool {
        if valid_until <= Instant::now() {
            tracing::warn!(
                election = self.election(),
                term,
                "elected, but the answer arrived after the leadership deadline; not leading"
            );
            return false;
        }
        if matches!(*self.standing(), Standing::Leader { term: current, .. } if current != term) {
            self.step_down("elected again with another term");
        }
        *self.standing() = Standing::Leader { term, valid_until };
        tracing::info!(election = self.election(), term, "elected leader");
        self.inner.watch.send_replace(LeaderState::Leader { term });
        if let Some(on_elected) = &self.inner.on_elected {
            on_elected(term);
        }
        true
    }

    /// Reports a confirmed renewal: leadership is trusted until `valid_until` (count it from
    /// before the renewal request was sent).
    ///
    /// Returns `false` when this candidate no longer leads, in particular when the previous
    /// deadline passed before the renewal was confirmed (it then steps down here): the elector
    /// must treat the term as over.
    pub fn renewed(&self, valid_until: Instant) -> bool {
        if !self.is_leader() {
            return false;
        }
        if let Standing::Leader {
            valid_until: current,
            ..
        } = &mut *self.standing()
        {
            *current = (*current).max(valid_until);
            return true;
        }
        false
    }

    /// Steps down now, if leading: the state becomes `Follower`, then `on_revoked` runs once.
    /// Returns whether this call ended a term.
    pub fn step_down(&self, reason: &str) -> bool {
        let ended = {
            let mut standing = self.standing();
            match *standing {
                Standing::Leader { term, .. } => {
                    *standing = Standing::Follower;
                    Some(term)
                }
                Standing::Follower => None,
            }
        };
        let Some(term) = ended else { return false };
        self.inner.watch.send_replace(LeaderState::Follower);
        tracing::info!(
            election = self.election(),
            term,
            reason,
            "leadership revoked"
        );
        if let Some(on_revoked) = &self.inner.on_revoked {
            on_revoked();
        }
        true
    }

    /// Where this candidate stands at this moment. Past the deadline it steps down first (so
    /// `on_revoked` has run when this returns `Follower`).
    pub fn state(&self) -> LeaderState {
        let standing = *self.standing();
        match standing {
            Standing::Leader { term, valid_until } if Instant::now() < valid_until => {
                LeaderState::Leader { term }
            }
            Standing::Leader { .. } => {
                self.step_down("leadership deadline passed without a confirmed renewal");
                LeaderState::Follower
            }
            Standing::Follower => LeaderState::Follower,
        }
    }

    /// Whether this candidate leads at this moment (see [`state`](Self::state)).
    pub fn is_leader(&self) -> bool {
        matches!(self.state(), LeaderState::Leader { .. })
    }

    /// The instant after which the current term is no longer trusted, if leading.
    pub fn valid_until(&self) -> Option<Instant> {
        match *self.standing() {
            Standing::Leader { valid_until, .. } => Some(valid_until),
            Standing::Follower => None,
        }
    }

    /// Completes when this candidate does not lead: at once if it does not, otherwise when the
    /// term ends (stepped down, or its deadline passed: then it steps down here).
    pub async fn term_ended(&self) {
        let mut changes = self.inner.watch.subscribe();
        loop {
            let Some(deadline) = self.valid_until() else {
                return;
            };
            tokio::select! {
                () = tokio::time::sleep_until(deadline) => {
                    if !self.is_leader() {
                        return;
                    }
                }
                changed = changes.changed() => {
                    if changed.is_err() {
                        return;
                    }
                }
            }
        }
    }

    /// A watch of the state as last reported, to await changes. To decide whether to act, ask
    /// [`is_leader`](Self::is_leader) at that moment instead.
    pub fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.inner.watch.subscribe()
    }
}

impl fmt::Debug for Candidacy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Candidacy")
            .field("election", &self.inner.election)
            .field("standing", &*self.standing())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::time::Duration;

    use super::*;

    fn counting() -> (Candidacy, Arc<AtomicU32>, Arc<AtomicU32>) {
        let (elected, revoked) = (Arc::new(AtomicU32::new(0)), Arc::new(AtomicU32::new(0)));
        let (e, r) = (Arc::clone(&elected), Arc::clone(&revoked));
        let candidacy = Candidacy::new(
            "batch",
            ElectionConfig::default(),
            Some(Arc::new(move |_| {
                e.fetch_add(1, Ordering::SeqCst);
            })),
            Some(Arc::new(move || {
                r.fetch_add(1, Ordering::SeqCst);
            })),
        );
        (candidacy, elected, revoked)
    }

    #[tokio::test(start_paused = true)]
    async fn past_the_deadline_it_does_not_lead_whatever_was_reported() {
        let (candidacy, elected, revoked) = counting();
        let deadline = Instant::now() + Duration::from_secs(2);
        assert!(candidacy.elected(7, deadline));
        assert_eq!(candidacy.state(), LeaderState::Leader { term: 7 });
        assert_eq!(elected.load(Ordering::SeqCst), 1);

        // A pause: time passes and nobody (no election task) reports anything.
        tokio::time::advance(Duration::from_secs(3)).await;
        assert_eq!(
            *candidacy.subscribe().borrow(),
            LeaderState::Leader { term: 7 },
            "the last report still says leader"
        );
        assert!(!candidacy.is_leader(), "the deadline decides");
        assert_eq!(revoked.load(Ordering::SeqCst), 1, "on_revoked ran first");
        assert_eq!(*candidacy.subscribe().borrow(), LeaderState::Follower);
        assert!(!candidacy.renewed(Instant::now() + Duration::from_secs(2)));
        assert!(!candidacy.step_down("again"), "one revocation per term");
        assert_eq!(revoked.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_election_answer_that_arrives_after_its_deadline_is_not_used() {
        let (candidacy, elected, _) = counting();
        let requested_at = Instant::now();
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(!candidacy.elected(1, requested_at + Duration::from_secs(2)));
        assert!(!candidacy.is_leader());
        assert_eq!(elected.load(Ordering::SeqCst), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_move_the_deadline_and_term_ended_follows_it() {
        let (candidacy, _, revoked) = counting();
        assert!(candidacy.elected(1, Instant::now() + Duration::from_secs(2)));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(candidacy.renewed(Instant::now() + Duration::from_secs(2)));
        tokio::time::advance(Duration::from_millis(1500)).await;
        assert!(candidacy.is_leader(), "renewed until 3 s");
        let started = Instant::now();
        candidacy.term_ended().await;
        assert_eq!(started.elapsed(), Duration::from_millis(500));
        assert_eq!(revoked.load(Ordering::SeqCst), 1);
    }
}
