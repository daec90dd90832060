//! [shedlock](https://docs.rs/shedlock) on [ZooKeeper](https://zookeeper.apache.org): a lock
//! provider on the ensemble's clock with fencing tokens rooted in zxids, and leader election
//! with ephemeral sequential nodes.
//!
//! - [`ZkLockProvider`]: the [`LockProvider`](shedlock_core::LockProvider) contract (the
//!   provider conformance suite passes unchanged, with and without credentials): one
//!   persistent node per lock holding the lease, written with compare-and-set on the node's
//!   version. Times are the ensemble's (the
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
//! use shedlock_core::LockConfiguration;
//! use shedlock_runtime::{LeaderElection, LockingTaskExecutor};
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
//! took office. Both are large numbers (the epoch of ZooKeeper's leader in the high 32 bits),
//! and keep growing across changes of ZooKeeper's own leader (a new epoch is a larger number).
//!
//! A node created again after a delete starts again at version 0, so a compare-and-set on the
//! version alone could let a holder that still runs write over the new holder's lease. Each
//! lock node is therefore created with a child of a random name (its *incarnation*), and
//! every write is a transaction that checks that child before the compare-and-set: a release
//! or extension meant for a deleted node is refused. To reset a lock by hand, delete its node
//! with its child (zkCli: `deleteall <root>/locks/<name>`); its holder, if it still runs, is
//! then refused, and the next token is above every earlier one.
//!
//! # Ticks
//!
//! A claim for a tick ([`LockConfiguration::for_tick`](shedlock_core::LockConfiguration::for_tick))
//! is granted only if the tick follows the last tick granted for the lock by its spacing and
//! lies no further ahead of ensemble time ("now", as above) than it allows; the grant writes it
//! into the lock node's data (`tick_ms`) in the same compare-and-set. Every other write to the
//! node carries it over, and lock nodes are persistent, so a tick stays granted after its
//! lease ends, released or expired. Nodes written before ticks have none: their next tick is
//! granted. Versions before ticks read `tick_ms` as data they did not write: during a rolling
//! upgrade, an instance still on one fails ([`Error::Store`](shedlock_core::Error::Store)) on
//! each lock an upgraded instance has claimed a tick of, and the upgraded instances run it.
//!
//! # Batches
//!
//! The ticks an instance has due at one instant are claimed in one call
//! ([`LockProvider::acquire_many`](shedlock_core::LockProvider::acquire_many)): one clock write
//! for "now", one `multiRead` of every lock node (ZooKeeper 3.6 or later; an older server gets
//! one acquire per lock), then one transaction with the writes of every lock granted, each
//! decided and written exactly as a single acquire's. Three requests for any number of locks
//! up to 200 (two when none is free), where single acquires send two or three each. A
//! transaction is all or nothing and names only its first failed operation: when another
//! instance wrote one of the nodes between the read and the transaction, that lock is refused
//! as an acquire would be, and the others are written each in its own transaction, all at once
//! (one more round trip; retrying the transaction without the lock lost could take one per
//! lock lost to that race). `zookeeper-client` 0.11 leaves Nagle's algorithm on, so requests
//! sent together usually still wait on the wire for the first one's answer: counted through a
//! proxy (`tests/batch.rs`), a batch of 100 is 3 requests and 3 round trips (2 and 2 held),
//! 100 acquires at once 300 requests and 4 round trips.
//!
//! # A shared ensemble
//!
//! Without credentials every node shedlock creates is open to every client of the ensemble
//! (`world:anyone`, all rights, ZooKeeper's `OPEN_ACL_UNSAFE`): any application or script on
//! it can rewrite a lease (take a lock from its holder, or hand a stale holder its lease
//! back), delete a lock, or delete a leader's candidate node (which hands leadership on).
//! That is fine on an ensemble of your own. On one shared with other applications:
//!
//! - **Credentials**: give the provider and the elector the same digest credentials
//!   ([`ZkLockProviderBuilder::digest_auth`], [`ZkElectorBuilder::digest_auth`]). Every node
//!   they create then grants that user everything and everyone else nothing, reading included
//!   (ZooKeeper's `CREATOR_ALL_ACL`). Nothing shedlock does needs unauthenticated reads (its own
//!   inspection writes the clock node, so it needs the credentials anyway); operators read
//!   with zkCli after `addauth digest user:password`, or as the ensemble's super user; and
//!   lock names and holders (host names, process ids) are none of other tenants' business.
//! - **A root of your own**: `.root("/services/billing/shedlock")`, or a chroot in the connect
//!   string (`zk1:2181,zk2:2181/services/billing`; the chroot node must exist), so that no two
//!   applications share lock or election names.
//! - **Parent nodes**: shedlock creates the missing ancestors of its root with its own ACL,
//!   which closes them to other applications too. Where others must create nodes beside
//!   yours, have an administrator create the parent first (with the ensemble's policy ACL,
//!   granting your user the right to create children); shedlock never changes the ACL of an
//!   existing ancestor.
//! - **A tree created without credentials**: run [`ZkLockProvider::create_schema`] once with
//!   them; it closes every node under the root that anyone may write.
//! - ZooKeeper's digest scheme sends `user:password` as it is, like all traffic on a plain
//!   connection: where the network is not trusted, reach the ensemble over TLS (not configured
//!   by this crate). SASL (Kerberos, DIGEST-MD5) is not supported.
//!
//! # Run records
//!
//! [`ZkLockProvider`] keeps the records of every run the scheduler starts under its locks
//! ([`RunLog`](shedlock_core::RunLog), returned by
//! [`LockProvider::run_log`](shedlock_core::LockProvider::run_log)) as nodes beside the lock
//! nodes: `<root>/runs/<lock>/<token>-<attempt>`, the record as JSON in the node's data, its
//! start the node's `ctime` and its end the `mtime` of the write that ended it (ensemble
//! time). Run nodes get the lock nodes' ACL.
//!
//! - **Writes**: a start is one `create`, an end one `setData` expecting the version a start
//!   leaves (each with its lock directory's `Stat` in the same round trip), so the first end
//!   recorded stays (a stalled holder's late end is refused by ZooKeeper). An end after
//!   heartbeats reads the node first and writes over the version read only while the run still
//!   runs (2 round trips).
//! - **Heartbeats** ([`RunLog::run_alive`](shedlock_core::RunLog::run_alive)): a start
//!   under a heartbeat writes `alive_for` (its run goes on until the node's `ctime` +
//!   `alive_for`), a renewal writes `alive_until` = now + the lease. "Now" is the ensemble's,
//!   read as [`store_time`](shedlock_core::LockInspector::store_time) reads it (a write to
//!   `<root>/clock`, pipelined with the node's read). A renewal is a `setData` on the version
//!   read, made only while the node runs and its heartbeat has not passed (2 round trips); one
//!   that reaches the ensemble after the heartbeat passed puts it back as it was and reports
//!   the run as not alive (ZooKeeper cannot make a write depend on its time).
//! - **Reads**: a lock's run node names sort as the lock granted its runs (token, then
//!   attempt), so a page lists the lock's names (about 35 bytes each, at most
//!   `runs_per_lock` + 16 of them) and reads only the page's nodes; `before`
//!   and pages across locks find their place from node `Stat`s (see
//!   [`RunQuery`](shedlock_core::RunQuery)). No request or answer holds more than one record
//!   or one lock's names, so no message grows with history.
//! - **What is kept**: per lock at most
//!   [`runs_per_lock`](ZkLockProviderBuilder::runs_per_lock) (1000, at most 20,000 so that a
//!   lock's names fit ZooKeeper's 1 MB reply) +
//!   [`RUN_TRIM_SLACK`](shedlock_core::RUN_TRIM_SLACK), the newest: the lock directory's
//!   child count, read by every start and end, triggers the trim, whichever instance writes.
//!   Runs older than [`run_retention`](ZkLockProviderBuilder::run_retention) (14 days) go,
//!   on every lock, including locks that never run again, within
//!   [`RUN_TRIM_SLACK`](shedlock_core::RUN_TRIM_SLACK) ends of a provider: every 16th end it
//!   records sweeps the lock directories, each of which holds a lower bound of its runs'
//!   starts (one small read per lock), and trims those past the retention; a directory left
//!   empty is deleted. No TTL nodes (they need `zookeeper.extendedTypesEnabled` on the
//!   ensemble).
//!
//! ```no_run
//! use shedlock_core::{LockProvider, RunQuery};
//! # async fn run(provider: shedlock_zookeeper::ZkLockProvider) -> Result<(), shedlock_core::Error> {
//! for run in provider.run_log().unwrap().runs(&RunQuery::lock("nightly").limit(10)).await? {
//!     println!("{run}"); // report #1 (token 4294967301) on web-1: succeeded in 1.2s
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Fleet board
//!
//! [`ZkLockProvider`] is the fleet's [`Board`](shedlock_core::Board) (what
//! [`Fleet`](shedlock_core::Fleet) publishes and switches): one persistent node per entry,
//! `<root>/board/<key>` (the key percent-encoded into one node name), the value in its data
//! after a header line holding the time to live. Times are the ensemble's: `written_at` is
//! the node's `mtime`, `expires_at` that `mtime` + the time to live (millisecond precision,
//! rounded up), and expiry is judged against "now" from a write to `<root>/clock`. Versions
//! are the node's `mzxid`, which keeps growing when a key is removed and written again. A
//! write or removal under a condition reads the node (one round trip, pipelined with "now")
//! and writes in one transaction that checks the node's version and the board directory's
//! (which every creation of an entry moves), so a node deleted and created again meanwhile
//! fails the check and is read again. A write whatever the key holds is a `setData` and a
//! creation sent together, of which exactly one writes (one round trip). Reading a prefix lists the directory's children and reads the
//! matching nodes in `multiRead`s sent at once (two round trips); expired nodes are never
//! read, and the read or removal that sees one deletes it. The directory is created on the
//! first write.
//!
//! # Errors
//!
//! ZooKeeper failures are [`Error::Store`](shedlock_core::Error::Store) naming the operation and
//! lock; a missing root node says to run [`create_schema`](ZkLockProvider::create_schema).
//! Every request is bounded by the request timeout (default 5 s): without a quorum, operations
//! fail instead of waiting. A node whose ACL refuses this session's credentials is a store error
//! saying to configure `digest_auth`. Invalid connect strings, roots, holders and credentials
//! are [`Error::InvalidConfig`](shedlock_core::Error::InvalidConfig) naming the field; the
//! password is never part of any error, log or `Debug` output.

mod access;
mod board;
mod builder;
mod election;
mod error;
mod inspect;
mod names;
mod provider;
mod record;
mod runs;
mod session;

pub use builder::{ZkElectorBuilder, ZkLockProviderBuilder};
pub use election::ZkElector;
pub use names::DEFAULT_ROOT;
pub use provider::ZkLockProvider;
