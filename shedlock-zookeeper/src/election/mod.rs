//! `ZkElector`: ZooKeeper's leader election recipe behind shedlock's [`Elector`] seam.

mod campaign;

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock_core::{
    Candidacy, ElectionConfig, Elector, Error, LockConfiguration, LockRecord, Operation,
    async_trait,
};
use tokio_util::sync::CancellationToken;

use crate::ZkElectorBuilder;
use crate::access::Access;
use crate::error::ZkError;
use crate::names::Paths;
use crate::session::{connect, timed};

/// Leader election on ZooKeeper: ephemeral sequential nodes, the lowest leads, each other
/// candidate watches only the node just below its own.
///
/// Pass it where an election needs an [`Elector`]: `LeaderElection::builder("batch", elector)`
/// or `Scheduler::builder().elector(elector)` for leader-only jobs, in place of a lock
/// provider. The election's [`ElectionConfig`] keeps its meaning:
///
/// - `lease_duration` is the **session timeout** requested for the campaign's own session:
///   when a candidate dies, the ensemble expires its session after this long and deletes its
///   node, and the next candidate leads.
/// - `renew_deadline`: the leader trusts its leadership until this long after the last write
///   the ensemble confirmed (counted from before the write was sent, on this process's
///   monotonic clock), scaled down if the ensemble granted a shorter session timeout than
///   requested. It is shorter than the session timeout, so a leader cut off from the ensemble
///   (or paused) steps down **before** the ensemble can expire its session and elect another.
///   Keep the difference above the ensemble's `tickTime`: a follower server tells the leader
///   server of a session's activity once per tick.
/// - `retry_period`: how often the leader confirms its session with a write to its own node,
///   and how long a candidate waits before trying again after an error.
///
/// The term (fencing token) of a leadership is the zxid of the write with which the candidate
/// took office: greater than every earlier leader's, since it follows their nodes' deletion.
/// A candidate that stepped down because its deadline passed, but whose session survived,
/// takes office again with a new write, so a new term; one whose session ended joins again
/// with a new node.
///
/// ```no_run
/// use shedlock_runtime::LeaderElection;
/// use shedlock_zookeeper::ZkElector;
///
/// # async fn run() -> Result<(), shedlock_core::Error> {
/// let elector = ZkElector::connect("zk1:2181,zk2:2181,zk3:2181").await?;
/// let election = LeaderElection::builder("batch", elector)
///     .on_elected(|term| println!("going to master mode (term {term})"))
///     .on_revoked(|| println!("going to slave mode"))
///     .start()?;
/// // … before each piece of master work:
/// if election.is_leader() { /* work */ }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ZkElector {
    connect_string: Arc<str>,
    /// Its `Debug` leaves the password out.
    access: Access,
    paths: Arc<Paths>,
    holder: Arc<str>,
}

impl ZkElector {
    /// An elector on the ensemble at `connect_string`, root `/shedlock`, candidates named by
    /// [`default_holder()`](shedlock_core::default_holder). Checks that the ensemble accepts a
    /// session and creates `/shedlock/elections` if missing.
    ///
    /// # Errors
    /// [`Error::Store`] when no server accepts a session within 5 s.
    pub async fn connect(connect_string: &str) -> Result<Self, Error> {
        Self::builder(connect_string).connect().await
    }

    /// Configures root, holder, credentials and the connect timeout; see [`ZkElectorBuilder`].
    pub fn builder(connect_string: impl Into<String>) -> ZkElectorBuilder {
        ZkElectorBuilder::new(connect_string.into())
    }

    pub(crate) fn from_parts(
        connect_string: &str,
        access: Access,
        paths: Arc<Paths>,
        holder: Arc<str>,
    ) -> Self {
        ZkElector {
            connect_string: connect_string.into(),
            access,
            paths,
            holder,
        }
    }

    /// The node under which the candidates of `election` create their nodes.
    pub fn election_path(&self, election: &str) -> String {
        self.paths.election(election)
    }

    /// The identity written into this candidate's nodes.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Who leads `election` now, as its candidates' nodes record it: the candidate whose
    /// node has the lowest sequence number, whether or not that candidate is this elector.
    /// For tools (the `shedlock` command's dashboard) that show an election's leader; `None`
    /// when no candidate campaigns. Opens a session of its own for the read (closed after
    /// it), lists the election's node and reads the leader's node; writes nothing.
    ///
    /// The record: `name` is the election, `holder` the leader's identity, `held` true,
    /// `locked_at` when the leader's node was created (the ensemble's clock). ZooKeeper keeps
    /// no record of the term (the zxid of the leader's first write in office): the
    /// `fencing_token` is 0. A reader learns that the leader's node exists, not when its
    /// session would expire: `read_at` is this machine's clock and `lock_until` one
    /// millisecond later.
    ///
    /// # Errors
    /// [`Error::Store`] ([`Operation::Read`]) when no server accepts a session or answers
    /// within 10 s, or the credentials may not read the election's nodes.
    pub async fn leader(&self, election: &str) -> Result<Option<LockRecord>, Error> {
        let dir = self.paths.election(election);
        let fail = |e: ZkError| e.at(&dir).into_store(Operation::Read, election);
        let timeout = LEADER_READ_TIMEOUT;
        let client = connect(&self.connect_string, &self.access, timeout, timeout)
            .await
            .map_err(fail)?;
        let children = match timed(timeout, client.list_children(&dir)).await {
            Ok(children) => children,
            Err(ZkError::Client(zookeeper_client::Error::NoNode)) => return Ok(None),
            Err(error) => return Err(fail(error)),
        };
        let mut candidates: Vec<(i64, &String)> = children
            .iter()
            .filter_map(|node| campaign::sequence(node).map(|sequence| (sequence, node)))
            .collect();
        candidates.sort();
        // A candidate may leave between the listing and the read: the next one leads then.
        for (_, node) in candidates {
            let path = format!("{dir}/{node}");
            let (data, stat) = match timed(timeout, client.get_data(&path)).await {
                Ok(read) => read,
                Err(ZkError::Client(zookeeper_client::Error::NoNode)) => continue,
                Err(error) => return Err(fail(error)),
            };
            let read_at = SystemTime::now();
            let created = UNIX_EPOCH + Duration::from_millis(stat.ctime.max(0).unsigned_abs());
            return Ok(Some(LockRecord::new(
                election,
                String::from_utf8_lossy(&data),
                created,
                read_at + Duration::from_millis(1),
                0,
                read_at,
            )));
        }
        Ok(None)
    }
}

/// How long [`ZkElector::leader`] waits for a session, and then for each read.
const LEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Longest session timeout ZooKeeper's protocol can carry (milliseconds in an `i32`).
const MAX_SESSION_TIMEOUT: Duration = Duration::from_millis(i32::MAX as u64);

#[async_trait]
impl Elector for ZkElector {
    fn check(&self, election: &str, config: &ElectionConfig) -> Result<(), Error> {
        config.validate()?;
        if config.lease_duration > MAX_SESSION_TIMEOUT {
            return Err(Error::invalid_config(
                "lease_duration",
                "is the ZooKeeper session timeout, at most 24 days",
            ));
        }
        // Election names follow the rules of lock names.
        LockConfiguration::new(election, config.lease_duration, Duration::ZERO).map(drop)
    }

    async fn campaign(&self, candidacy: &Candidacy, stop: &CancellationToken) {
        campaign::Campaign {
            connect_string: &self.connect_string,
            access: &self.access,
            dir: self.paths.election(candidacy.election()),
            holder: &self.holder,
            config: candidacy.config(),
            candidacy,
            stop,
        }
        .run()
        .await;
    }
}
