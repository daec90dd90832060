//! Leader election, the store's side: one instance leads at a time; the others take over when
//! it dies, or at once when it resigns.
//!
//! Every [`LockProvider`](crate::LockProvider) is an [`Elector`] (a long lease on the election's
//! lock, renewed with Kubernetes client-go's rules); other stores bring their own (ZooKeeper's
//! ephemeral sequential nodes). Whatever the elector, it reports to a [`Candidacy`], which
//! answers "do I lead?" at the moment it is asked, from a deadline on this process's monotonic
//! clock, so a leader that was paused past that deadline never acts as leader again before it
//! is re-elected. The runtime's `LeaderElection` runs an elector's campaign.

mod candidacy;
mod config;
mod lease;

use std::fmt;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

pub use candidacy::{Candidacy, ElectedFn, RevokedFn};
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
