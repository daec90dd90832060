//! Builders for the provider and the elector: root, holder and timeouts, checked before
//! anything is sent.

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::{Error, Operation, default_holder};

use crate::paths::{DEFAULT_ROOT, Paths, validate_holder};
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
    request_timeout: Duration,
}

impl Common {
    fn new(connect_string: String) -> Self {
        Common {
            connect_string,
            root: DEFAULT_ROOT.to_owned(),
            holder: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
        }
    }

    fn check(&self) -> Result<(Paths, Arc<str>), Error> {
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
        Ok((Paths::new(&self.root)?, validate_holder(holder)?))
    }
}

/// Builds a [`ZkLockProvider`]; see [`ZkLockProvider::builder`].
///
/// ```no_run
/// # async fn run() -> Result<(), shedlock_core::Error> {
/// use std::time::Duration;
/// use shedlock_zookeeper::ZkLockProvider;
///
/// let provider = ZkLockProvider::builder("zk1:2181,zk2:2181,zk3:2181")
///     .root("/services/billing/shedlock")
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
}

impl ZkLockProviderBuilder {
    pub(crate) fn new(connect_string: String) -> Self {
        ZkLockProviderBuilder {
            common: Common::new(connect_string),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
        }
    }

    /// The node under which locks, clock and elections live (default `/shedlock`).
    pub fn root(mut self, root: impl Into<String>) -> Self {
        self.common.root = root.into();
        self
    }

    /// The identity this provider acquires locks as (default
    /// [`default_holder()`](shedlock_core::default_holder): `host:pid:random`).
    pub fn holder(mut self, holder: impl Into<String>) -> Self {
        self.common.holder = Some(holder.into());
        self
    }

    /// The session timeout to request (default 10 s; the ensemble clamps it to its
    /// `minSessionTimeout..maxSessionTimeout`). Lock nodes do not depend on the session; this
    /// only decides how long a lost connection is retried before a new session is opened.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long any request, and connecting, may take before it fails with
    /// [`Error::Store`] (default 5 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.common.request_timeout = timeout;
        self
    }

    /// Checks the configuration and opens a session.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field (`connect_string`, `root`, `holder`,
    /// `session_timeout`, `request_timeout`); [`Error::Store`] when no server accepts a
    /// session within the request timeout.
    pub async fn connect(self) -> Result<ZkLockProvider, Error> {
        let (paths, holder) = self.common.check()?;
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
            self.session_timeout,
            self.common.request_timeout,
        )
        .await
        .map_err(|e| e.into_store(Operation::Schema, &paths.root))?;
        Ok(ZkLockProvider::from_parts(session, paths, holder))
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

    /// The node under which elections live, in `<root>/elections` (default `/shedlock`).
    pub fn root(mut self, root: impl Into<String>) -> Self {
        self.common.root = root.into();
        self
    }

    /// The identity written into this candidate's node (default
    /// [`default_holder()`](shedlock_core::default_holder)), for people reading the tree.
    pub fn holder(mut self, holder: impl Into<String>) -> Self {
        self.common.holder = Some(holder.into());
        self
    }

    /// How long connecting may take before it fails (default 5 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.common.request_timeout = timeout;
        self
    }

    /// Checks the configuration, and that the ensemble accepts a session, and creates
    /// `<root>/elections` if missing. Campaigns open sessions of their own.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field; [`Error::Store`] when no server accepts a
    /// session within the request timeout, or the elections node cannot be created.
    pub async fn connect(self) -> Result<ZkElector, Error> {
        let (paths, holder) = self.common.check()?;
        let fail = |e: crate::error::ZkError| e.into_store(Operation::Schema, &paths.elections);
        let session = Session::open(
            &self.common.connect_string,
            DEFAULT_SESSION_TIMEOUT,
            self.common.request_timeout,
        )
        .await
        .map_err(fail)?;
        let client = session.client().await.map_err(fail)?;
        let persistent = zookeeper_client::CreateMode::Persistent
            .with_acls(zookeeper_client::Acls::anyone_all());
        session
            .timed(client.mkdir(&paths.elections, &persistent))
            .await
            .map_err(fail)?;
        Ok(ZkElector::from_parts(
            &self.common.connect_string,
            Arc::new(paths),
            holder,
        ))
    }
}
