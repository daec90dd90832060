//! Leader election: one instance leads at a time; the others take over when it dies, or at once
//! when it resigns.
//!
//! Every [`LockProvider`](crate::LockProvider) is an [`Elector`] (a long lease on the election's
//! lock, renewed with Kubernetes client-go's rules); other stores bring their own (ZooKeeper's
//! ephemeral sequential nodes). Whatever the elector, a [`LeaderElection`] answers "do I lead?"
//! at the moment it is asked, from a deadline on this process's monotonic clock, so a leader
//! that was paused past that deadline never acts as leader again before it is re-elected.

mod candidacy;
mod config;
mod lease;

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use candidacy::Candidacy;
use candidacy::{ElectedFn, RevokedFn};
pub use config::ElectionConfig;

use crate::Error;

/// Where this instance stands in an election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderState {
    /// Another instance leads, or nobody does yet.
    Follower,
    /// This instance leads. `term` is strictly greater than every earlier term of this election
    /// (the lease's fencing token on a lock provider), so it can fence the leader's writes.
    Leader {
        /// The leadership's fencing token.
        term: u64,
    },
}

/// A store that can elect a leader among candidates: runs one candidate's campaign.
///
/// Every [`LockProvider`](crate::LockProvider) is one (lease-based, client-go's rules). Other
/// implementations report to the [`Candidacy`] they are given: [`Candidacy::elected`] with a
/// term and a deadline on this process's monotonic clock before which no other candidate can be
/// elected, [`Candidacy::renewed`] to move that deadline, [`Candidacy::step_down`] when the
/// leadership ends. The candidacy steps down by itself when the deadline passes.
#[async_trait]
pub trait Elector: Send + Sync + fmt::Debug + 'static {
    /// Checks the election's name and timing before campaigning starts.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming what is wrong.
    fn check(&self, election: &str, config: &ElectionConfig) -> Result<(), Error>;

    /// Campaigns for this candidate in its election ([`Candidacy::election`], with the timing
    /// [`Candidacy::config`] that [`check`](Self::check) accepted) until `stop` is cancelled,
    /// reporting through `candidacy`. When `stop` fires, a leader steps down first, then gives
    /// up its leadership in the store (so that another candidate can take over at once), then
    /// returns.
    async fn campaign(&self, candidacy: &Candidacy, stop: &CancellationToken);
}

/// Builds a [`LeaderElection`]; see [`LeaderElection::builder`].
pub struct LeaderElectionBuilder {
    name: String,
    elector: Arc<dyn Elector>,
    config: ElectionConfig,
    on_elected: Option<ElectedFn>,
    on_revoked: Option<RevokedFn>,
}

impl LeaderElectionBuilder {
    /// The election's timing (client-go defaults otherwise).
    pub fn config(mut self, config: ElectionConfig) -> Self {
        self.config = config;
        self
    }

    /// Called with the term when this instance becomes leader. Runs on the election's task:
    /// spawn anything slow.
    pub fn on_elected(mut self, callback: impl Fn(u64) + Send + Sync + 'static) -> Self {
        self.on_elected = Some(Arc::new(callback));
        self
    }

    /// Called when this instance stops leading: lease lost, renewal deadline passed (noticed by
    /// the election's task, or by a caller of [`LeaderElection::is_leader`] first), or resigned.
    /// Always follows an `on_elected`, once per term.
    pub fn on_revoked(mut self, callback: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_revoked = Some(Arc::new(callback));
        self
    }

    /// Validates and starts campaigning on the current tokio runtime.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an invalid name or timing.
    pub fn start(self) -> Result<LeaderElection, Error> {
        self.elector.check(&self.name, &self.config)?;
        let candidacy = Candidacy::new(&self.name, self.config, self.on_elected, self.on_revoked);
        let stop = CancellationToken::new();
        let task = tokio::spawn(campaign(self.elector, candidacy.clone(), stop.clone()));
        Ok(LeaderElection {
            name: self.name,
            candidacy,
            stop,
            task: tokio::sync::Mutex::new(Some(task)),
        })
    }
}

/// The election's task: the elector's campaign, and a watchdog that steps down at the deadline
/// even while the campaign waits on its store.
async fn campaign(elector: Arc<dyn Elector>, candidacy: Candidacy, stop: CancellationToken) {
    let watchdog = async {
        let mut changes = candidacy.subscribe();
        loop {
            candidacy.term_ended().await;
            if changes.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    };
    tokio::select! {
        () = elector.campaign(&candidacy, &stop) => {}
        never = watchdog => never,
    }
    candidacy.step_down("campaign ended");
}

impl fmt::Debug for LeaderElectionBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElectionBuilder")
            .field("name", &self.name)
            .field("elector", &self.elector)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A running candidacy in a leader election.
///
/// ```
/// use shedlock_core::{InMemoryLockProvider, LeaderElection, LeaderState};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), shedlock_core::Error> {
/// let election = LeaderElection::builder("batch", InMemoryLockProvider::new())
///     .on_elected(|term| println!("leading, term {term}"))
///     .on_revoked(|| println!("no longer leading"))
///     .start()?;
/// let mut state = election.subscribe();
/// state.wait_for(|s| matches!(s, LeaderState::Leader { .. })).await.unwrap();
/// assert!(election.is_leader());
/// election.resign().await;
/// assert_eq!(election.state(), LeaderState::Follower);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct LeaderElection {
    name: String,
    candidacy: Candidacy,
    stop: CancellationToken,
    task: tokio::sync::Mutex<Option<JoinHandle<()>>>,
}

impl LeaderElection {
    /// A candidate for the election `name` on `elector`: any lock provider (the election's lock
    /// is `name`), or another store's elector.
    pub fn builder(name: impl Into<String>, elector: impl Elector) -> LeaderElectionBuilder {
        Self::builder_shared(name, Arc::new(elector))
    }

    /// Like [`builder`](Self::builder), on a shared elector.
    pub fn builder_shared(
        name: impl Into<String>,
        elector: Arc<dyn Elector>,
    ) -> LeaderElectionBuilder {
        LeaderElectionBuilder {
            name: name.into(),
            elector,
            config: ElectionConfig::default(),
            on_elected: None,
            on_revoked: None,
        }
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where this instance stands at this moment: `Leader` only before the leadership's
    /// deadline (the last confirmed renewal plus `renew_deadline` on a lock provider). Past it,
    /// this steps down first, so `on_revoked` has run when it returns `Follower`.
    pub fn state(&self) -> LeaderState {
        self.candidacy.state()
    }

    /// Whether this instance leads at this moment (see [`state`](Self::state)). Ask it right
    /// before acting as leader, not earlier.
    pub fn is_leader(&self) -> bool {
        self.candidacy.is_leader()
    }

    /// The candidacy: deadline-checked state, and [`Candidacy::term_ended`] to await the end
    /// of the current term.
    pub fn candidacy(&self) -> &Candidacy {
        &self.candidacy
    }

    /// A watch of the state as last reported, to await changes. To decide whether to act, ask
    /// [`is_leader`](Self::is_leader) at that moment instead.
    pub fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.candidacy.subscribe()
    }

    /// Stops campaigning. A leader steps down (`on_revoked` runs), then releases its lease so a
    /// follower takes over at once (on PostgreSQL within milliseconds); both happen before this
    /// returns.
    pub async fn resign(&self) {
        self.stop.cancel();
        if let Some(task) = self.task.lock().await.take()
            && let Err(error) = task.await
        {
            tracing::error!(election = %self.name, %error, "election task failed");
        }
    }
}

impl Drop for LeaderElection {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
