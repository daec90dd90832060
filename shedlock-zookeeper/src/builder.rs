//! Builders for the provider and the elector: root, holder, credentials and timeouts, checked
//! before anything is sent.

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::{
    DEFAULT_RUN_RETENTION, DEFAULT_RUNS_PER_LOCK, Error, Operation, default_holder,
};

use crate::access::{Access, Digest};
use crate::names::{DEFAULT_ROOT, Paths, validate_holder};
use crate::runs::RunNodes;
use crate::session::Session;
use crate::{ZkElector, ZkLockProvider};

/// Default requested session timeout of a provider's session.
const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// Default bound on every request (and on connecting).
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What both builders configure.
#[derive(Debug, Clone)]
struct Common {
    connect_string: String,
    root: String,
    holder: Option<String>,
    /// Its `Debug` leaves the password out.
    digest: Option<Digest>,
    request_timeout: Duration,
}

impl Common {
    fn new(connect_string: String) -> Self {
        Common {
            connect_string,
            root: DEFAULT_ROOT.to_owned(),
            holder: None,
            digest: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }

    fn digest(&mut self, user: String, password: String) {
        self.digest = Some(Digest { user, password });
    }

    fn check(&self) -> Result<(Paths, Arc<str>, Access), Error> {
        if self.connect_string.trim().is_empty() {
            return Err(Error::invalid_config(
                "connect_string",
                "must name at least one server, like \"zk1:2181,zk2:2181,zk3:2181\"",
            ));
        }
        if self.request_timeout.is_zero() {
            return Err(Error::invalid_config(
                "request_timeout",
                "must be greater than zero",
            ));
        }
        let holder = self
            .holder
            .clone()
            .unwrap_or_else(|| default_holder().to_owned());
        Ok((
            Paths::new(&self.root)?,
            validate_holder(holder)?,
            Access::new(self.digest.as_ref())?,
        ))
    }
}

/// The setters both builders share.
macro_rules! common_setters {
    () => {
        /// The node under which everything lives (default `/shedlock`): a provider's locks,
        /// clock and run records, and elections in `<root>/elections`.
        pub fn root(mut self, root: impl Into<String>) -> Self {
            self.common.root = root.into();
            self
        }

        /// The identity this instance acts as (default
        /// [`default_holder()`](shedlock_core::default_holder): `host:pid:random`): a provider
        /// acquires locks as it; an elector writes it into its candidate's node, for people
        /// reading the tree.
        pub fn holder(mut self, holder: impl Into<String>) -> Self {
            self.common.holder = Some(holder.into());
            self
        }

        /// Authenticates every session with ZooKeeper's digest scheme (`addauth digest
        /// user:password`), and closes every node the provider or the elector (and its
        /// campaigns) create to other clients: the nodes get ZooKeeper's `CREATOR_ALL_ACL`,
        /// all rights for this user and none for anyone else, reading included. Every instance
        /// that shares the locks, or runs in the same election, must use the same user and
        /// password. [`create_schema`](ZkLockProvider::create_schema) also closes nodes that
        /// already exist under the root and that anyone may write.
        ///
        /// Without credentials (the default) the nodes are open to every client of the
        /// ensemble (`world:anyone`, all rights): any of them can rewrite a lease, delete a
        /// lock, or delete a leader's node (and so hand leadership to the next candidate).
        ///
        /// The password never appears in `Debug` output, errors or logs. ZooKeeper keeps the
        /// user and a hash of the password in each node's ACL, so a new password locks the
        /// instances out of the nodes made with the old one: change it together with the
        /// nodes' ACLs (as the ensemble's super user), or start on a new root.
        pub fn digest_auth(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
            self.common.digest(user.into(), password.into());
            self
        }

        /// How long connecting, and every request of a provider (of an elector: those of its
        /// `connect`), may take before it fails with [`Error::Store`] (default 5 s).
        pub fn request_timeout(mut self, timeout: Duration) -> Self {
            self.common.request_timeout = timeout;
            self
        }
    };
}

/// Builds a [`ZkLockProvider`]; see [`ZkLockProvider::builder`].
///
/// On an ensemble shared with other applications, give the provider credentials
/// ([`digest_auth`](Self::digest_auth)) and a root of its own; see the crate docs, "A shared
/// ensemble".
///
/// ```no_run
/// # async fn run() -> Result<(), shedlock_core::Error> {
/// use std::time::Duration;
/// use shedlock_zookeeper::ZkLockProvider;
///
/// let provider = ZkLockProvider::builder("zk1:2181,zk2:2181,zk3:2181")
///     .root("/services/billing/shedlock")
///     .digest_auth("billing", std::env::var("ZK_PASSWORD").unwrap_or_default())
///     .holder("billing-7f9c:4121")
///     .request_timeout(Duration::from_secs(2))
///     .connect()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct ZkLockProviderBuilder {
    common: Common,
    session_timeout: Duration,
    run_retention: Duration,
    runs_per_lock: u32,
}

impl ZkLockProviderBuilder {
    pub(crate) fn new(connect_string: String) -> Self {
        ZkLockProviderBuilder {
            common: Common::new(connect_string),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            run_retention: DEFAULT_RUN_RETENTION,
            runs_per_lock: DEFAULT_RUNS_PER_LOCK,
        }
    }

    common_setters!();

    /// The session timeout to request (default 10 s; the ensemble clamps it to its
    /// `minSessionTimeout..maxSessionTimeout`). Lock nodes do not depend on the session; this
    /// only decides how long a lost connection is retried before a new session is opened.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    shedlock_core::run_retention_setters! {
        /// They are nodes under `<root>/runs`; older ones are deleted on every lock, including
        /// locks that never run again, by a sweep every 16th end a provider records
        /// ([`RUN_TRIM_SLACK`](shedlock_core::RUN_TRIM_SLACK)).
        run_retention;
        /// A lock's newest runs are kept: its directory is trimmed back to this many when a
        /// start or an end finds it holding half of
        /// [`RUN_TRIM_SLACK`](shedlock_core::RUN_TRIM_SLACK) more. At most 20,000 on
        /// ZooKeeper: a lock's run node names are listed in one reply, which the ensemble
        /// bounds (`jute.maxbuffer`, 1 MB by default).
        runs_per_lock;
    }

    /// Checks the configuration and opens a session.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field (`connect_string`, `root`, `holder`,
    /// `digest_user`, `digest_password`, `session_timeout`, `request_timeout`,
    /// `run_retention`, `runs_per_lock`); [`Error::Store`] when no server accepts a session
    /// within the request timeout.
    pub async fn connect(self) -> Result<ZkLockProvider, Error> {
        let (paths, holder, access) = self.common.check()?;
        let runs = RunNodes::new(&paths.root, self.run_retention, self.runs_per_lock)?;
        if self.session_timeout < Duration::from_millis(1)
            || self.session_timeout > Duration::from_millis(i32::MAX as u64)
        {
            return Err(Error::invalid_config(
                "session_timeout",
                "must be between 1 ms and 24 days",
            ));
        }
        let session = Session::open(
            &self.common.connect_string,
            access,
            self.session_timeout,
            self.common.request_timeout,
        )
        .await
        .map_err(|e| e.into_store(Operation::Schema, &paths.root))?;
        Ok(ZkLockProvider::from_parts(session, paths, holder, runs))
    }
}

/// Builds a [`ZkElector`]; see [`ZkElector::builder`].
#[derive(Debug, Clone)]
pub struct ZkElectorBuilder {
    common: Common,
}

impl ZkElectorBuilder {
    pub(crate) fn new(connect_string: String) -> Self {
        ZkElectorBuilder {
            common: Common::new(connect_string),
        }
    }

    common_setters!();

    /// Checks the configuration, and that the ensemble accepts a session, and creates
    /// `<root>/elections` if missing. Campaigns open sessions of their own.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field (`connect_string`, `root`, `holder`,
    /// `digest_user`, `digest_password`, `request_timeout`); [`Error::Store`] when no server
    /// accepts a session within the request timeout, or the elections node cannot be created.
    pub async fn connect(self) -> Result<ZkElector, Error> {
        let (paths, holder, access) = self.common.check()?;
        let fail = |e: crate::error::ZkError| e.into_store(Operation::Schema, &paths.elections);
        let session = Session::open(
            &self.common.connect_string,
            access.clone(),
            DEFAULT_SESSION_TIMEOUT,
            self.common.request_timeout,
        )
        .await
        .map_err(fail)?;
        let client = session.client().await.map_err(fail)?;
        session
            .timed(client.mkdir(&paths.elections, &access.persistent()))
            .await
            .map_err(fail)?;
        Ok(ZkElector::from_parts(
            &self.common.connect_string,
            access,
            Arc::new(paths),
            holder,
        ))
    }
}
