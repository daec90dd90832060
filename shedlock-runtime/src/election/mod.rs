//! Leader election: one instance leads at a time; the others take over when it dies, or at once
//! when it resigns.
//!
//! A [`LeaderElection`] runs one candidate's campaign on any [`Elector`] (every lock provider is
//! one; ZooKeeper and etcd bring their own) and answers "do I lead?" at the moment it is asked,
//! from its [`Candidacy`]'s deadline on this process's monotonic clock, so a leader that was
//! paused past that deadline never acts as leader again before it is re-elected.

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::metrics::ElectionMetrics;
use crate::{Candidacy, ElectedFn, ElectionConfig, Elector, Error, LeaderState, RevokedFn};

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
        // Metrics first, then the caller's callback, in the candidacy's order.
        let metrics = Arc::new(ElectionMetrics::new(&self.name));
        let elected = Arc::clone(&metrics);
        let on_elected = self.on_elected;
        let on_elected: ElectedFn = Arc::new(move |term| {
            elected.elected();
            if let Some(on_elected) = &on_elected {
                on_elected(term);
            }
        });
        let on_revoked = self.on_revoked;
        let on_revoked: RevokedFn = Arc::new(move || {
            metrics.stepped_down();
            if let Some(on_revoked) = &on_revoked {
                on_revoked();
            }
        });
        let candidacy = Candidacy::new(&self.name, self.config, Some(on_elected), Some(on_revoked));
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
/// use shedlock_core::{InMemoryLockProvider, LeaderState};
/// use shedlock_runtime::LeaderElection;
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
