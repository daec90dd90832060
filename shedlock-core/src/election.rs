//! Leader election on any lock provider: one instance holds a long lease and renews it; the
//! others take over when it dies, or at once when it resigns.
//!
//! The parameters and their rules are those of Kubernetes client-go's `leaderelection`:
//! `lease_duration > renew_deadline > 1.2 × retry_period`. The leader steps down on its own
//! monotonic clock when it cannot renew by `renew_deadline`, which comes before the lease can
//! expire in the store, so two leaders never overlap while clocks run at the same rate.

use std::fmt;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::lock_config::MAX_DURATION;
use crate::{Error, LockConfiguration, LockLease, LockProvider};

/// Timing of a leader election (client-go's names and defaults: 15 s / 10 s / 2 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ElectionConfig {
    /// How long a lease lasts in the store without renewal; a crashed leader is replaced after
    /// at most this plus one retry period.
    #[serde(with = "humantime_serde")]
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it steps down.
    #[serde(with = "humantime_serde")]
    pub renew_deadline: Duration,
    /// How often the leader renews and followers retry (followers add up to 20 % jitter).
    #[serde(with = "humantime_serde")]
    pub retry_period: Duration,
}

impl Default for ElectionConfig {
    fn default() -> Self {
        ElectionConfig {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl ElectionConfig {
    /// Checks `lease_duration > renew_deadline > 1.2 × retry_period > 0`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field that breaks the rule.
    pub fn validate(&self) -> Result<(), Error> {
        if self.retry_period.is_zero() {
            return Err(Error::invalid_config(
                "retry_period",
                "must be greater than zero",
            ));
        }
        if self.lease_duration > MAX_DURATION {
            return Err(Error::invalid_config(
                "lease_duration",
                "must be at most 100 years",
            ));
        }
        // In floating point: `retry_period × 1.2` may not fit a Duration.
        if self.renew_deadline.as_secs_f64() <= self.retry_period.as_secs_f64() * 1.2 {
            return Err(Error::invalid_config(
                "renew_deadline",
                "must be longer than 1.2 × retry_period",
            ));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(Error::invalid_config(
                "lease_duration",
                "must be longer than renew_deadline",
            ));
        }
        Ok(())
    }
}

/// Where this instance stands in an election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaderState {
    /// Another instance leads, or nobody does yet.
    Follower,
    /// This instance leads. `term` is the lease's fencing token: strictly greater than every
    /// earlier term of this election.
    Leader {
        /// The fencing token of the leader's lease.
        term: u64,
    },
}

type ElectedFn = Arc<dyn Fn(u64) + Send + Sync>;
type RevokedFn = Arc<dyn Fn() + Send + Sync>;

/// Builds a [`LeaderElection`]; see [`LeaderElection::builder`].
pub struct LeaderElectionBuilder {
    name: String,
    provider: Arc<dyn LockProvider>,
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

    /// Called when this instance stops leading: lease lost, renewal deadline passed, or
    /// resigned. Always follows an `on_elected`.
    pub fn on_revoked(mut self, callback: impl Fn() + Send + Sync + 'static) -> Self {
        self.on_revoked = Some(Arc::new(callback));
        self
    }

    /// Validates and starts campaigning on the current tokio runtime.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for an invalid name or timing.
    pub fn start(self) -> Result<LeaderElection, Error> {
        self.config.validate()?;
        let lock = LockConfiguration::new(self.name, self.config.lease_duration, Duration::ZERO)?;
        let (state, watch) = watch::channel(LeaderState::Follower);
        let stop = CancellationToken::new();
        let campaign = Campaign {
            lock,
            provider: self.provider,
            config: self.config,
            on_elected: self.on_elected,
            on_revoked: self.on_revoked,
            state,
            stop: stop.clone(),
        };
        Ok(LeaderElection {
            name: campaign.lock.name().to_owned(),
            watch,
            stop,
            task: tokio::sync::Mutex::new(Some(tokio::spawn(campaign.run()))),
        })
    }
}

impl fmt::Debug for LeaderElectionBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LeaderElectionBuilder")
            .field("name", &self.name)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

/// A running candidacy in a leader election.
///
/// ```
/// use std::time::Duration;
/// use shedlock_core::{ElectionConfig, InMemoryLockProvider, LeaderElection, LeaderState};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), shedlock_core::Error> {
/// let election = LeaderElection::builder("batch", InMemoryLockProvider::new())
///     .on_elected(|term| println!("leading, term {term}"))
///     .on_revoked(|| println!("no longer leading"))
///     .start()?;
/// let mut state = election.subscribe();
/// state.wait_for(|s| matches!(s, LeaderState::Leader { .. })).await.unwrap();
/// election.resign().await;
/// assert_eq!(election.state(), LeaderState::Follower);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct LeaderElection {
    name: String,
    watch: watch::Receiver<LeaderState>,
    stop: CancellationToken,
    task: tokio::sync::Mutex<Option<JoinHandle<()>>>,
}

impl LeaderElection {
    /// A candidate for the election `name` (the lock name) on `provider`.
    pub fn builder(name: impl Into<String>, provider: impl LockProvider) -> LeaderElectionBuilder {
        Self::builder_shared(name, Arc::new(provider))
    }

    /// Like [`builder`](Self::builder), on a shared provider.
    pub fn builder_shared(
        name: impl Into<String>,
        provider: Arc<dyn LockProvider>,
    ) -> LeaderElectionBuilder {
        LeaderElectionBuilder {
            name: name.into(),
            provider,
            config: ElectionConfig::default(),
            on_elected: None,
            on_revoked: None,
        }
    }

    /// The election's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where this instance stands now.
    pub fn state(&self) -> LeaderState {
        *self.watch.borrow()
    }

    /// Whether this instance leads now.
    pub fn is_leader(&self) -> bool {
        matches!(self.state(), LeaderState::Leader { .. })
    }

    /// A watch of this instance's state, to await changes.
    pub fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.watch.clone()
    }

    /// Stops campaigning. A leader releases its lease first (so a follower takes over at once;
    /// on PostgreSQL within milliseconds) and `on_revoked` runs before this returns.
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

struct Campaign {
    lock: LockConfiguration,
    provider: Arc<dyn LockProvider>,
    config: ElectionConfig,
    on_elected: Option<ElectedFn>,
    on_revoked: Option<RevokedFn>,
    state: watch::Sender<LeaderState>,
    stop: CancellationToken,
}

impl Campaign {
    async fn run(self) {
        let mut hints = self.provider.release_hints();
        while !self.stop.is_cancelled() {
            let requested_at = Instant::now();
            match self.provider.acquire(&self.lock).await {
                Ok(Some(lease)) => {
                    self.lead(lease, requested_at).await;
                    continue;
                }
                Ok(None) => {}
                Err(error) => {
                    tracing::warn!(election = self.lock.name(), %error, "campaign attempt failed")
                }
            }
            let wait = self.config.retry_period.mul_f64(1.0 + 0.2 * jitter());
            tokio::select! {
                () = self.stop.cancelled() => {}
                () = tokio::time::sleep(wait) => {}
                () = release_hint(&mut hints, self.lock.name()) => {}
            }
        }
    }

    /// Leads until the lease is lost, cannot be renewed in time, or the candidate resigns.
    async fn lead(&self, mut lease: LockLease, requested_at: Instant) {
        let term = lease.fencing_token();
        tracing::info!(
            election = self.lock.name(),
            holder = lease.holder(),
            term,
            "elected leader"
        );
        self.state.send_replace(LeaderState::Leader { term });
        if let Some(on_elected) = &self.on_elected {
            on_elected(term);
        }
        // The lease cannot be trusted past this instant: renewals count from before they were sent.
        let mut renew_by = requested_at + self.config.renew_deadline;
        let ended = loop {
            let next_try = (Instant::now() + self.config.retry_period).min(renew_by);
            tokio::select! {
                () = self.stop.cancelled() => break "resigned",
                () = tokio::time::sleep_until(next_try) => {}
            }
            if Instant::now() >= renew_by {
                break "renew deadline passed";
            }
            let started = Instant::now();
            let renewal = tokio::time::timeout_at(
                renew_by,
                self.provider
                    .extend(&lease, self.config.lease_duration, Duration::ZERO),
            )
            .await;
            match renewal {
                Ok(Ok(Some(renewed))) => {
                    lease = renewed;
                    renew_by = started + self.config.renew_deadline;
                }
                Ok(Ok(None)) => break "lease lost",
                Ok(Err(error)) => {
                    tracing::warn!(election = self.lock.name(), %error, "lease renewal failed, retrying")
                }
                Err(_elapsed) => break "renew deadline passed",
            }
        };
        // Step down locally first, then tell the store.
        self.state.send_replace(LeaderState::Follower);
        tracing::info!(
            election = self.lock.name(),
            term,
            reason = ended,
            "leadership revoked"
        );
        if let Some(on_revoked) = &self.on_revoked {
            on_revoked();
        }
        if ended != "lease lost" {
            let release = self.provider.release(&lease);
            match tokio::time::timeout(self.config.retry_period, release).await {
                Ok(Ok(_)) => {}
                Ok(Err(error)) => {
                    tracing::warn!(election = self.lock.name(), %error, "could not release the lease; it expires by itself")
                }
                Err(_) => tracing::warn!(
                    election = self.lock.name(),
                    "release timed out; the lease expires by itself"
                ),
            }
        }
    }
}

/// Completes when the store hints that `name` was released; never, without hints.
async fn release_hint(hints: &mut Option<tokio::sync::broadcast::Receiver<Arc<str>>>, name: &str) {
    let Some(receiver) = hints else {
        return std::future::pending().await;
    };
    loop {
        match receiver.recv().await {
            Ok(released) if &*released == name => return,
            Ok(_) => {}
            // Missed hints may include ours: retry now.
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                *hints = None;
                return std::future::pending().await;
            }
        }
    }
}

/// A number in `[0, 1)` that differs between calls and processes, for retry jitter.
fn jitter() -> f64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(Instant::now().elapsed().as_nanos());
    (hasher.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timing_rules_of_client_go() {
        ElectionConfig::default().validate().unwrap();
        let s = Duration::from_secs;
        let field = |lease, renew, retry| match (ElectionConfig {
            lease_duration: s(lease),
            renew_deadline: s(renew),
            retry_period: s(retry),
        })
        .validate()
        {
            Err(Error::InvalidConfig { field, .. }) => field,
            other => panic!("{other:?}"),
        };
        assert_eq!(field(10, 10, 2), "lease_duration");
        assert_eq!(field(15, 12, 10), "renew_deadline");
        assert_eq!(field(15, 10, 0), "retry_period");
        let huge = Duration::MAX;
        let config = ElectionConfig {
            lease_duration: huge,
            renew_deadline: huge,
            retry_period: huge,
        };
        assert!(config.validate().is_err(), "an error, not a panic");
    }

    #[test]
    fn jitter_is_in_range() {
        assert!((0..100).map(|_| jitter()).all(|j| (0.0..1.0).contains(&j)));
    }
}
