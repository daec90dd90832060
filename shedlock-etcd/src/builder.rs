//! Builders for the provider and the elector: endpoints, prefix, holder, credentials, TLS and
//! timeouts, checked before anything is sent.

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::{
    DEFAULT_RUN_RETENTION, DEFAULT_RUNS_PER_LOCK, Error, Operation, default_holder, validate_holder,
};

use crate::client::{Client, Connection, Credentials};
use crate::hints::Hints;
use crate::names::{DEFAULT_PREFIX, Keys};
use crate::runs::Retention;
use crate::{EtcdElector, EtcdLockProvider};

/// Default bound on every request (and on connecting).
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What both builders configure. Its `Debug` leaves the password out.
#[derive(Debug, Clone)]
struct Common {
    endpoints: String,
    prefix: String,
    holder: Option<String>,
    credentials: Option<Credentials>,
    request_timeout: Duration,
    #[cfg(feature = "tls")]
    tls: Option<TlsOptions>,
}

/// TLS settings handed to tonic as they are.
#[cfg(feature = "tls")]
#[derive(Clone)]
struct TlsOptions(tonic::transport::ClientTlsConfig);

#[cfg(feature = "tls")]
impl std::fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The config may carry a client key: never printed.
        f.write_str("ClientTlsConfig { .. }")
    }
}

impl Common {
    fn new(endpoints: String) -> Self {
        Common {
            endpoints,
            prefix: DEFAULT_PREFIX.to_owned(),
            holder: None,
            credentials: None,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }

    fn check(&self) -> Result<(Connection, Keys, Arc<str>), Error> {
        let endpoints: Vec<String> = self
            .endpoints
            .split(',')
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .map(str::to_owned)
            .collect();
        if endpoints.is_empty() {
            return Err(Error::invalid_config(
                "endpoints",
                "must name at least one member, like \"http://etcd1:2379,http://etcd2:2379\"",
            ));
        }
        for endpoint in &endpoints {
            let scheme_ok = endpoint.starts_with("http://") || endpoint.starts_with("https://");
            if !scheme_ok || endpoint.parse::<tonic::codegen::http::Uri>().is_err() {
                return Err(Error::invalid_config(
                    "endpoints",
                    format!("{endpoint:?} is not a URL like \"http://etcd1:2379\""),
                ));
            }
        }
        if self.request_timeout.is_zero() {
            return Err(Error::invalid_config(
                "request_timeout",
                "must be greater than zero",
            ));
        }
        if let Some(credentials) = &self.credentials {
            if credentials.user.is_empty() {
                return Err(Error::invalid_config("user", "must not be empty"));
            }
            if credentials.password.is_empty() {
                return Err(Error::invalid_config("password", "must not be empty"));
            }
        }
        let holder = self
            .holder
            .clone()
            .unwrap_or_else(|| default_holder().to_owned());
        validate_holder(&holder)?;
        let connection = Connection {
            endpoints,
            credentials: self.credentials.clone(),
            request_timeout: self.request_timeout,
            #[cfg(feature = "tls")]
            tls: self.tls.as_ref().map(|tls| tls.0.clone()),
        };
        Ok((connection, Keys::new(self.prefix.clone())?, holder.into()))
    }

    async fn connect(&self) -> Result<(Client, Keys, Arc<str>), Error> {
        let (connection, keys, holder) = self.check()?;
        let client = Client::connect(&connection)
            .await
            .map_err(|e| e.into_store(Operation::Schema, keys.prefix()))?;
        Ok((client, keys, holder))
    }
}

/// The setters both builders share.
macro_rules! common_setters {
    () => {
        /// The prefix of every key written (default `shedlock/`). Give each application on a
        /// shared cluster a prefix of its own, and grant its etcd user that prefix only.
        pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
            self.common.prefix = prefix.into();
            self
        }

        /// The identity this instance acts as (default
        /// [`default_holder()`](shedlock_core::default_holder): `host:pid:random`).
        pub fn holder(mut self, holder: impl Into<String>) -> Self {
            self.common.holder = Some(holder.into());
            self
        }

        /// Authenticates with etcd's user and password (`etcdctl user add`): a token is
        /// requested at connect and again whenever etcd says it expired. Needed when the
        /// cluster has auth enabled; the user needs read and write on the prefix.
        ///
        /// The password never appears in `Debug` output, errors or logs. Without TLS it
        /// travels in clear, like all traffic: reach the cluster over TLS where the network
        /// is not trusted.
        pub fn credentials(mut self, user: impl Into<String>, password: impl Into<String>) -> Self {
            self.common.credentials = Some(Credentials {
                user: user.into(),
                password: password.into(),
            });
            self
        }

        /// TLS to every member (endpoints `https://…`): CA, client identity and domain name
        /// as tonic's [`ClientTlsConfig`](tonic::transport::ClientTlsConfig) takes them,
        /// passed through unchanged. Needs the crate's `tls` feature.
        #[cfg(feature = "tls")]
        pub fn tls(mut self, config: tonic::transport::ClientTlsConfig) -> Self {
            self.common.tls = Some(TlsOptions(config));
            self
        }

        /// How long any request, and connecting, may take before it fails with
        /// [`Error::Store`] (default 5 s).
        pub fn request_timeout(mut self, timeout: Duration) -> Self {
            self.common.request_timeout = timeout;
            self
        }
    };
}

/// Builds an [`EtcdLockProvider`]; see [`EtcdLockProvider::builder`].
///
/// ```no_run
/// # async fn run() -> Result<(), shedlock_core::Error> {
/// use std::time::Duration;
/// use shedlock_etcd::EtcdLockProvider;
///
/// let provider = EtcdLockProvider::builder("http://etcd1:2379,http://etcd2:2379,http://etcd3:2379")
///     .prefix("billing/shedlock/")
///     .credentials("billing", std::env::var("ETCD_PASSWORD").unwrap_or_default())
///     .holder("billing-7f9c:4121")
///     .request_timeout(Duration::from_secs(2))
///     .connect()
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct EtcdLockProviderBuilder {
    common: Common,
    run_retention: Duration,
    runs_per_lock: u32,
}

impl EtcdLockProviderBuilder {
    pub(crate) fn new(endpoints: String) -> Self {
        EtcdLockProviderBuilder {
            common: Common::new(endpoints),
            run_retention: DEFAULT_RUN_RETENTION,
            runs_per_lock: DEFAULT_RUNS_PER_LOCK,
        }
    }

    common_setters!();

    shedlock_core::run_retention_setters! {
        /// Records live on one etcd lease per time bucket (1/64 of the retention, whole
        /// seconds, at least one), revoked by the first write after the bucket's start is a
        /// retention old: a record is kept at least the retention less a bucket and at most
        /// the retention. At least one second.
        run_retention;
        /// Counted as each record is written: past this + 8 the lock's oldest are deleted,
        /// whichever instance writes and whatever other locks do.
        runs_per_lock;
    }

    /// Checks the configuration and connects (with credentials: authenticates).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field (`endpoints`, `prefix`, `holder`, `user`,
    /// `password`, `request_timeout`, `run_retention`, `runs_per_lock`); [`Error::Store`]
    /// when no member answers within the request timeout or the credentials are refused.
    pub async fn connect(self) -> Result<EtcdLockProvider, Error> {
        let retention = Retention::new(self.run_retention, self.runs_per_lock)?;
        self.common.check()?;
        let (client, keys, holder) = self.common.connect().await?;
        Ok(EtcdLockProvider {
            client,
            keys: Arc::new(keys),
            holder,
            hints: Arc::new(Hints::default()),
            retention,
        })
    }
}

/// Builds an [`EtcdElector`]; see [`EtcdElector::builder`].
#[derive(Debug, Clone)]
pub struct EtcdElectorBuilder {
    common: Common,
}

impl EtcdElectorBuilder {
    pub(crate) fn new(endpoints: String) -> Self {
        EtcdElectorBuilder {
            common: Common::new(endpoints),
        }
    }

    common_setters!();

    /// Checks the configuration and connects (with credentials: authenticates).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the field (`endpoints`, `prefix`, `holder`, `user`,
    /// `password`, `request_timeout`); [`Error::Store`] when no member answers within the
    /// request timeout or the credentials are refused.
    pub async fn connect(self) -> Result<EtcdElector, Error> {
        let (client, keys, holder) = self.common.connect().await?;
        Ok(EtcdElector::from_parts(client, Arc::new(keys), holder))
    }
}
