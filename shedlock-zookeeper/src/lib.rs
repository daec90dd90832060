//! [shedlock](https://docs.rs/shedlock) on [ZooKeeper](https://zookeeper.apache.org): a lock
//! provider on the ensemble's clock with fencing tokens rooted in zxids, and leader election
//! with ephemeral sequential nodes.
//!
//! - [`ZkLockProvider`]: the [`LockProvider`](shedlock_core::LockProvider) contract (the
//!   provider conformance suite passes unchanged): one persistent node per lock holding the
//!   lease, written with compare-and-set on the node's version. Times are the ensemble's (the
//!   `mtime` ZooKeeper's leader stamps on every write); fencing tokens start at the node's
//!   creation zxid and grow by one per acquisition.
//! - [`ZkElector`]: ZooKeeper's election recipe behind shedlock's
//!   [`Elector`](shedlock_core::Elector) seam: each candidate creates an ephemeral sequential
//!   node, the lowest leads, every other candidate watches only the node just below its own.
//!   Switching an election from a SQL table to ZooKeeper is one line:
//!   `LeaderElection::builder("batch", elector)`, or `Scheduler::builder().elector(elector)`
//!   for leader-only jobs.
//!
//! ```no_run
//! use std::time::Duration;
//! use shedlock_core::{LeaderElection, LockConfiguration, LockingTaskExecutor};
//! use shedlock_zookeeper::ZkLockProvider;
//!
//! # async fn run() -> Result<(), shedlock_core::Error> {
//! let provider = ZkLockProvider::connect("zk1:2181,zk2:2181,zk3:2181").await?;
//! provider.create_schema().await?; // /shedlock/{clock,locks,elections}
//!
//! let executor = LockingTaskExecutor::new(provider.clone());
//! let config = LockConfiguration::new("send_newsletter", Duration::from_secs(300), Duration::ZERO)?;
//! executor.execute(&config, async { /* the job */ }).await?;
//!
//! let election = LeaderElection::builder("batch", provider.elector())
//!     .on_elected(|term| println!("master mode, term {term}"))
//!     .on_revoked(|| println!("slave mode"))
//!     .start()?;
//! # Ok(())
//! # }
//! ```
//!
//! # Ensemble time
//!
//! ZooKeeper has no "read the clock" request. Every write's `Stat` carries `mtime`, the wall
//! clock of the ensemble's leader when it ordered the write, so the provider takes "now" from a
//! write to `<root>/clock` and stores each lease relative to the write that stored it
//! (`lock_until = mtime + lock_at_most_for`). Instances' clocks never enter. The ensemble's
//! servers' clocks should agree (NTP): when ZooKeeper's own leader changes, "now" becomes the
//! new leader's clock.
//!
//! # Fencing tokens
//!
//! The first acquisition of a lock creates its node and gets the node's `czxid` as token; each
//! later acquisition gets the previous token + 1, in the same compare-and-set write that grants
//! it. Every write takes a new zxid, so the k-th token is at most the zxid of the k-th
//! acquiring write: a lock node deleted by hand and created again starts above every token it
//! gave before. Terms of [`ZkElector`] elections are the zxids of the writes with which leaders
//! took office. Both are large numbers (the epoch of ZooKeeper's leader in the high 32 bits).
//!
//! # Errors
//!
//! ZooKeeper failures are [`Error::Store`](shedlock_core::Error::Store) naming the operation and
//! lock; a missing root node says to run [`create_schema`](ZkLockProvider::create_schema).
//! Every request is bounded by the request timeout (default 5 s): without a quorum, operations
//! fail instead of waiting. Invalid connect strings, roots and holders are
//! [`Error::InvalidConfig`](shedlock_core::Error::InvalidConfig) naming the field.

mod access;
mod builder;
mod election;
mod error;
mod inspect;
mod paths;
mod provider;
mod record;
mod session;

pub use builder::{ZkElectorBuilder, ZkLockProviderBuilder};
pub use election::ZkElector;
pub use inspect::ZkLockRow;
pub use paths::DEFAULT_ROOT;
pub use provider::ZkLockProvider;
