//! `ZkLockProvider`: the lock contract on ZooKeeper nodes, compare-and-set on node versions.
//! This module holds the type and its public API; `lease` the contract's operations, `claim`
//! an acquisition's decision and its lease, `batch` many acquisitions at once, `write` the
//! transactions they write with, `own` what they remember of their writes, `schema` the
//! root's nodes and their ACLs, `inspect` the read side (`LockInspector`).

mod batch;
mod claim;
mod lease;
mod own;
mod schema;
pub(crate) mod write;

use std::sync::{Arc, Mutex};

use shedlock_core::{Error, Operation};
use zookeeper_client::Client;

use crate::error::ZkError;
use crate::names::Paths;
use crate::record::LeaseRecord;
use crate::session::Session;
use crate::{ZkElector, ZkLockProviderBuilder};

/// Locks as ZooKeeper nodes, on the ensemble's clock, with zxids as fencing tokens.
///
/// Each lock is a persistent node `<root>/locks/<name>` whose data is the lease, written with
/// compare-and-set on the node's version, in a transaction that also checks the node's
/// incarnation child (see the crate docs, "Fencing tokens"). Times are the ensemble's: "now"
/// is the `mtime` of a write to `<root>/clock` made for the purpose (ZooKeeper has no clock
/// read), and a lease's `locked_at` is the `mtime` of the write that granted it. The fencing
/// token of the first acquisition is the lock node's `czxid` (the zxid of the write that
/// created it), and each later acquisition adds one in the same compare-and-set write, so
/// tokens strictly increase per lock, by one, and stay above every earlier token even if the
/// node is deleted by hand. A claim for a tick compares it with the last tick the node's data
/// keeps (see the crate docs, "Ticks") before the same compare-and-set.
///
/// | operation | round trips | writes |
/// |---|---|---|
/// | acquire, lock held | 1 (clock write and node read, pipelined) | 1 (clock) |
/// | acquire, lock free | 2 | 2 (clock, lease) |
/// | release | 1 | 1 |
/// | extend | 2 | 2 (clock, lease) |
/// | acquire_many (up to 200 locks), none free | 1 (clock write and one `multiRead`, pipelined) | 1 (clock) |
/// | acquire_many (up to 200 locks), some free | 2 (then one transaction for them all) | 2 (clock, every lease) |
///
/// Pipelined requests may still wait on each other on the wire (see the crate docs,
/// "Batches"). Release and extend use the node version this provider last wrote; if the node
/// changed since (another holder took the lock over, or it was deleted and created again),
/// they read it once and match holder and token. What the provider remembers of its writes is bounded
/// by its live leases, not by the number of lock names it ever used.
///
/// With [`digest_auth`](ZkLockProviderBuilder::digest_auth) credentials, every node it
/// creates is closed to other clients; without, nodes are open to every client of the
/// ensemble (see the crate docs, "A shared ensemble").
///
/// Requests that get no answer within the request timeout (default 5 s) fail with
/// [`Error::Store`]: an acquire never waits for a lost quorum to come back.
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_core::{LockConfiguration, LockProvider};
/// use shedlock_zookeeper::ZkLockProvider;
///
/// # async fn run() -> Result<(), shedlock_core::Error> {
/// let provider = ZkLockProvider::connect("zk1:2181,zk2:2181,zk3:2181").await?;
/// provider.create_schema().await?;
/// let config = LockConfiguration::new("nightly_report", Duration::from_secs(600), Duration::ZERO)?;
/// if let Some(lease) = provider.acquire(&config).await? {
///     println!("running with fencing token {}", lease.fencing_token());
///     provider.release(&lease).await?;
/// }
/// # Ok(())
/// # }
/// ```
///
/// It is its own [`LockInspector`](shedlock_core::LockInspector): lock nodes read as
/// [`LockRecord`](shedlock_core::LockRecord)s on ensemble time (each read writes the clock
/// node for "now"), and an operator's `release_lock` ends a lease with a compare-and-set on the
/// node version it read.
///
/// Clones share the session.
#[derive(Debug, Clone)]
pub struct ZkLockProvider {
    pub(crate) session: Arc<Session>,
    pub(crate) paths: Arc<Paths>,
    pub(crate) holder: Arc<str>,
    pub(crate) runs: Arc<crate::runs::RunNodes>,
    /// This provider's last write per lock: release and extend need no read while nobody
    /// else wrote the node.
    own: Arc<Mutex<own::OwnWrites>>,
}

impl ZkLockProvider {
    /// Connects to the ensemble (`host:port,host:port,…`, optionally with a chroot suffix
    /// `/path`) with root `/shedlock`, holding as
    /// [`default_holder()`](shedlock_core::default_holder).
    ///
    /// # Errors
    /// [`Error::Store`] when no server accepts a session within the request timeout.
    pub async fn connect(connect_string: &str) -> Result<Self, Error> {
        Self::builder(connect_string).connect().await
    }

    /// Configures root, holder, credentials and timeouts; see [`ZkLockProviderBuilder`].
    pub fn builder(connect_string: impl Into<String>) -> ZkLockProviderBuilder {
        ZkLockProviderBuilder::new(connect_string.into())
    }

    pub(crate) fn from_parts(
        session: Session,
        paths: Paths,
        holder: Arc<str>,
        runs: crate::runs::RunNodes,
    ) -> Self {
        ZkLockProvider {
            session: Arc::new(session),
            paths: Arc::new(paths),
            holder,
            runs: Arc::new(runs),
            own: Arc::default(),
        }
    }

    /// The same ensemble and session acting as another holder (another instance).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`holder`) when empty, longer than 255 characters or holding
    /// control characters.
    pub fn with_holder(&self, holder: impl Into<String>) -> Result<Self, Error> {
        Ok(ZkLockProvider {
            holder: crate::names::validate_holder(holder.into())?,
            ..self.clone()
        })
    }

    /// The root node under which the locks, the clock and the elections live.
    pub fn root(&self) -> &str {
        &self.paths.root
    }

    /// An elector on the same ensemble, root and holder, for
    /// the runtime's `LeaderElection` and leader-only jobs. Each election
    /// campaigns on a session of its own.
    pub fn elector(&self) -> ZkElector {
        ZkElector::from_parts(
            self.session.connect_string(),
            self.session.access().clone(),
            Arc::clone(&self.paths),
            Arc::clone(&self.holder),
        )
    }

    /// How many locks this provider (and its clones) remembers its last write for. Not public
    /// API: for tests of the bound on that memory.
    #[doc(hidden)]
    pub fn remembered_writes(&self) -> usize {
        self.own.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    pub(crate) async fn client(
        &self,
        operation: Operation,
        lock: &str,
    ) -> Result<Arc<Client>, Error> {
        self.session
            .client()
            .await
            .map_err(|e| e.into_store(operation, lock))
    }

    /// The error for a ZooKeeper failure on `path`; a missing parent means a missing schema.
    pub(crate) fn fail(
        &self,
        operation: Operation,
        lock: &str,
        path: &str,
        error: ZkError,
    ) -> Error {
        self.schema_error(path, error).into_store(operation, lock)
    }

    /// Decodes a lock node, or fails naming it.
    pub(crate) fn decode(
        &self,
        lock: &str,
        operation: Operation,
        data: &[u8],
    ) -> Result<LeaseRecord, Error> {
        LeaseRecord::decode(data).map_err(|reason| {
            ZkError::Unreadable {
                path: self.paths.lock(lock),
                reason,
            }
            .into_store(operation, lock)
        })
    }
}
