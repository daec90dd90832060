//! [shedlock](https://docs.rs/shedlock) on [etcd](https://etcd.io) (v3 API, 3.4 or later): a
//! lock provider whose leases are etcd's own, with the cluster's revision as fencing token,
//! and leader election on leases and revisions.
//!
//! - [`EtcdLockProvider`]: the [`LockProvider`](shedlock_core::LockProvider) contract (the
//!   provider conformance suite passes unchanged): a lock is held while its key exists on an
//!   etcd lease, created in a transaction that requires it absent. Tokens are revisions.
//!   Also a [`LockInspector`](shedlock_core::LockInspector) and a
//!   [`RunLog`](shedlock_core::RunLog), and release hints from a watch.
//! - [`EtcdElector`]: etcd's election recipe behind shedlock's
//!   [`Elector`](shedlock_core::Elector) seam: the candidate with the oldest key leads.
//!   Switching an election from a SQL table to etcd is one line:
//!   `LeaderElection::builder("batch", provider.elector())`.
//!
//! ```no_run
//! use std::time::Duration;
//! use shedlock_core::{LeaderElection, LockConfiguration, LockingTaskExecutor};
//! use shedlock_etcd::EtcdLockProvider;
//!
//! # async fn run() -> Result<(), shedlock_core::Error> {
//! let provider =
//!     EtcdLockProvider::connect("http://etcd1:2379,http://etcd2:2379,http://etcd3:2379").await?;
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
//! # etcd's time
//!
//! etcd has no clock to read; it has leases, whose time-to-live its leader counts down. Who
//! may hold a lock is decided by etcd on those leases alone: a lease key exists or it does
//! not. Leases are whole seconds, so a lease lasts `lock_at_most_for` rounded up to a whole
//! second, and at least etcd's minimum TTL (about 2 s with the default heartbeat and election
//! timeout); when etcd's own leader changes, the new leader gives every lease its full TTL
//! again. A lock whose holder dies is therefore held at least as long as asked, sometimes
//! longer, never shorter.
//!
//! The times a [`LockLease`](shedlock_core::LockLease) and a lock's record report
//! (`locked_at`, `lock_until`) are read from the clock of the instance that wrote them. Two
//! decisions are taken on them, both about a lock that is already free, never about a running
//! lease: [`unless_acquired_within`](shedlock_core::LockConfiguration::unless_acquired_within)
//! compares the record's `locked_at` with the acquiring instance's clock; and a
//! `lock_at_least_for` that a release left running ends when the record's `lock_until` has
//! passed: the releasing instance deletes the minimum-hold key then, and if it cannot (paused,
//! gone), the next instance to acquire does. Keep the fleet's clocks in sync (NTP), as for
//! any deployment.
//!
//! # Keys
//!
//! Under the prefix (default `shedlock/`): `locks/<name>` (the record: last holder, token and
//! times, JSON, kept after release), `held/<name>` (on the lease; exists while held),
//! `least/<name>` (on a lease of `lock_at_least_for`; exists until the minimum hold has
//! passed), `runs/<name>/<token>-<attempt>` (run records, each on a lease of the retention),
//! `elections/<election>/<lease>` (candidates). To reset a lock by hand, delete its keys
//! (`etcdctl del --prefix shedlock/held/<name>` and the like): its holder, if it still runs,
//! is then refused at release and extension, and the next token is above every earlier one.
//!
//! # Fencing tokens
//!
//! A lease's token is the revision of the transaction that granted it. etcd's revision counts
//! every write to the cluster, never goes back (not after a delete, a compaction or a
//! restart), and is agreed by the cluster's quorum: so tokens strictly increase per lock, and
//! leader terms (the revision of the leader's key) are on the same scale. Pass the token to
//! the resource you write and have it reject older ones.
//!
//! # Auth and TLS
//!
//! [`credentials`](EtcdLockProviderBuilder::credentials) sets etcd's user and password; the
//! token etcd hands out is renewed when it expires. Grant the user read and write on the
//! prefix only (`etcdctl role grant-permission <role> readwrite --prefix shedlock/`). With the
//! `tls` feature, [`tls`](EtcdLockProviderBuilder::tls) passes tonic's TLS settings through.
//! Passwords, tokens and TLS keys never appear in any error, log or `Debug` output.
//!
//! # Errors
//!
//! etcd failures are [`Error::Store`](shedlock_core::Error::Store) naming the operation and
//! lock. Every request is bounded by the request timeout (default 5 s): without a quorum,
//! operations fail instead of waiting. A member that does not answer is left for the next
//! endpoint; reads and lease requests are sent again there at once, a transaction only when
//! it cannot have reached the first member. Invalid endpoints, prefixes, holders and
//! credentials are [`Error::InvalidConfig`](shedlock_core::Error::InvalidConfig) naming the
//! field.
//!
//! # The client
//!
//! The crate speaks etcd's gRPC API itself, on [tonic](https://docs.rs/tonic) 0.14 and
//! [prost](https://docs.rs/prost), with the few messages it sends declared by hand: the
//! maintained etcd client crates generate their code from etcd's `.proto` files in a build
//! script that needs `protoc` installed, which a `cargo build` on a fresh machine does not
//! have.

mod builder;
mod client;
mod election;
mod error;
#[cfg(test)]
mod figures;
mod hints;
mod inspect;
mod keys;
mod provider;
mod record;
mod runs;
mod wire;

pub use builder::{EtcdElectorBuilder, EtcdLockProviderBuilder};
pub use election::EtcdElector;
pub use keys::DEFAULT_PREFIX;
pub use provider::EtcdLockProvider;
