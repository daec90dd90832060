//! The builders of both providers: key prefix, holder, timeouts, hints and run records for
//! both; the RedLock settings on RedLock's only.

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::{DEFAULT_RUN_RETENTION, DEFAULT_RUNS_PER_LOCK, Error, default_holder};

use crate::board::BoardKeys;
use crate::names::{DEFAULT_KEY_PREFIX, validate_holder, validate_prefix};
use crate::runs::RunKeys;
use crate::{RedLockProvider, RedisLockProvider};

/// Configures a [`RedisLockProvider`] on one server ([`connect`](Self::connect)); as
/// [`RedLockProviderBuilder`] (from [`RedLockProvider::builder`], or [`redlock`](Self::redlock)
/// keeping these settings), a [`RedLockProvider`] on independent masters.
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_redis::RedisLockProvider;
///
/// # async fn run() -> Result<(), shedlock_core::Error> {
/// let provider = RedisLockProvider::builder()
///     .key_prefix("billing:locks:")
///     .timeout(Duration::from_millis(500))
///     .connect("redis://127.0.0.1:6379")
///     .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct RedisLockProviderBuilder<K = SingleServer> {
    pub(crate) key_prefix: String,
    pub(crate) holder: Option<String>,
    pub(crate) timeout: Duration,
    pub(crate) release_channel: Option<String>,
    pub(crate) hints: bool,
    pub(crate) runs_key_prefix: Option<String>,
    pub(crate) run_retention: Duration,
    pub(crate) runs_per_lock: u32,
    pub(crate) board_key_prefix: Option<String>,
    pub(crate) tls_root_certificates: Option<Arc<[u8]>>,
    wait_for_replicas: Option<WaitForReplicas>,
    kind: K,
}

/// Configures a [`RedLockProvider`]: the settings of [`RedisLockProviderBuilder`] and the
/// algorithm's own (clock drift, retries of a split vote).
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_redis::RedLockProvider;
///
/// # async fn run() -> Result<(), shedlock_core::Error> {
/// let provider = RedLockProvider::builder()
///     .timeout(Duration::from_millis(100))
///     .clock_drift_factor(0.01)
///     .connect(["redis://10.0.0.1:6379", "redis://10.0.0.2:6379", "redis://10.0.0.3:6379"])
///     .await?;
/// # Ok(())
/// # }
/// ```
pub type RedLockProviderBuilder = RedisLockProviderBuilder<Majority>;

/// The kind of [`RedisLockProviderBuilder`] that connects to one server.
#[derive(Debug, Clone, Copy, Default)]
pub struct SingleServer;

/// The kind of [`RedisLockProviderBuilder`] that connects to RedLock masters, with the
/// algorithm's settings.
#[derive(Debug, Clone, Copy)]
pub struct Majority {
    clock_drift_factor: f64,
    retries: u32,
    retry_delay: Duration,
}

impl Default for Majority {
    fn default() -> Self {
        Majority {
            clock_drift_factor: 0.01,
            retries: 3,
            retry_delay: Duration::from_millis(50),
        }
    }
}

/// What a builder produced, validated, before connecting.
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) key_prefix: Arc<str>,
    pub(crate) holder: Arc<str>,
    /// Empty: no hints are published.
    pub(crate) channel: Arc<str>,
    pub(crate) timeout: Duration,
    pub(crate) runs: RunKeys,
    pub(crate) board: BoardKeys,
    /// PEM root certificates to trust instead of the system's, for `rediss://`.
    pub(crate) tls_root_certificates: Option<Arc<[u8]>>,
    /// Whether grants wait for replicas (one server or Sentinel only).
    pub(crate) wait_for_replicas: Option<WaitForReplicas>,
}

/// How many replicas must acknowledge a grant, and within how long (`WAIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WaitForReplicas {
    pub(crate) replicas: u32,
    pub(crate) timeout: Duration,
}

impl Settings {
    /// What a node takes of these settings to connect.
    pub(crate) fn connect(&self) -> crate::node::Connect<'_> {
        crate::node::Connect {
            timeout: self.timeout,
            tls_root_certificates: self.tls_root_certificates.as_deref(),
            wait_timeout: self
                .wait_for_replicas
                .map_or(Duration::ZERO, |wait| wait.timeout),
        }
    }
}

impl<K: Default> Default for RedisLockProviderBuilder<K> {
    fn default() -> Self {
        RedisLockProviderBuilder {
            key_prefix: DEFAULT_KEY_PREFIX.to_owned(),
            holder: None,
            timeout: Duration::from_secs(1),
            release_channel: None,
            hints: true,
            runs_key_prefix: None,
            run_retention: DEFAULT_RUN_RETENTION,
            runs_per_lock: DEFAULT_RUNS_PER_LOCK,
            board_key_prefix: None,
            tls_root_certificates: None,
            wait_for_replicas: None,
            kind: K::default(),
        }
    }
}

impl<K> RedisLockProviderBuilder<K> {
    /// Keys start with this, default `shedlock:` (lock `nightly` is the hash `shedlock:nightly`).
    /// At most 128 bytes, no spaces, control or glob characters (`* ? [ ] \`).
    pub fn key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.key_prefix = prefix.into();
        self
    }

    /// Acquire locks as this holder instead of [`default_holder()`].
    pub fn holder(mut self, holder: impl Into<String>) -> Self {
        self.holder = Some(holder.into());
        self
    }

    /// How long one command may take on one server before it counts as failed: default 1 s.
    ///
    /// For RedLock this is the per-master timeout of the algorithm, which must be much shorter
    /// than the leases (a master that does not answer in time counts as not acquired); 50 to
    /// 250 ms suits leases of seconds.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Publish release hints on this channel instead of `<key prefix>released`.
    pub fn release_channel(mut self, channel: impl Into<String>) -> Self {
        self.release_channel = Some(channel.into());
        self
    }

    /// Publish no release hints, and offer none.
    pub fn without_release_hints(mut self) -> Self {
        self.hints = false;
        self
    }

    /// Run records ([`RunLog`](shedlock_core::RunLog)) are kept under keys starting with this,
    /// default `runs:` followed by the key prefix (`runs:shedlock:`). It must not start with
    /// the key prefix, nor the key prefix with it: the lock keys are only lock hashes.
    pub fn runs_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.runs_key_prefix = Some(prefix.into());
        self
    }

    /// The fleet's [board](shedlock_core::Board) is kept under keys starting with this,
    /// default `board:` followed by the key prefix (`board:shedlock:`). It must not start with
    /// the key prefix or the runs key prefix, nor they with it. Instances of one fleet share
    /// it; see [the board](crate#the-fleets-board).
    pub fn board_key_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.board_key_prefix = Some(prefix.into());
        self
    }

    /// For `rediss://` URLs: trust the root certificates in `pem` (one or more PEM
    /// certificates, e.g. the private CA that signed the servers' certificates) instead of the
    /// system's. Without it the system's roots are trusted, and the `SSL_CERT_FILE` and
    /// `SSL_CERT_DIR` environment variables name other ones (so does the `shedlock` command).
    /// Connecting fails (`InvalidConfig`, `tls_root_certificates`) for a `redis://` URL.
    ///
    /// ```no_run
    /// use shedlock_redis::RedisLockProvider;
    ///
    /// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
    /// let provider = RedisLockProvider::builder()
    ///     .tls_root_certificates(std::fs::read("/etc/redis/ca.pem")?)
    ///     .connect("rediss://:secret@redis.internal:6380")
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls_root_certificates(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.tls_root_certificates = Some(pem.into().into());
        self
    }

    shedlock_core::run_retention_setters! {
        /// Older ones are deleted by the scripts that record runs: a lock's own at its next
        /// write, any lock's within the next writes of the others (up to 64 each), and a
        /// lock's keys expire this long after its last run was recorded. A run still live
        /// (heartbeat not passed) is kept until it ends. The sweep deletes other locks'
        /// records by this provider's retention: instances sharing a key prefix should share
        /// this setting.
        run_retention;
        /// The scripts that record a run of a lock delete its older ones beyond this in the
        /// same round trip, so a lock never holds more (but for runs still live).
        runs_per_lock;
    }

    fn settings(self) -> Result<Settings, Error> {
        if self.timeout.is_zero() {
            return Err(Error::invalid_config(
                "timeout",
                "must be greater than zero",
            ));
        }
        let key_prefix = validate_prefix(self.key_prefix)?;
        let holder = validate_holder(self.holder.unwrap_or_else(|| default_holder().to_owned()))?;
        let channel = match (self.hints, self.release_channel) {
            (false, _) => String::new(),
            (true, Some(channel)) if channel.is_empty() => {
                return Err(Error::invalid_config(
                    "release_channel",
                    "must not be empty (use without_release_hints to publish none)",
                ));
            }
            (true, Some(channel)) => channel,
            (true, None) => format!("{key_prefix}released"),
        };
        if let Some(wait) = self.wait_for_replicas
            && (wait.replicas == 0 || wait.timeout.is_zero())
        {
            // WAIT with a zero timeout would block for ever.
            return Err(Error::invalid_config(
                "wait_for_replicas",
                "needs at least one replica and a timeout above zero",
            ));
        }
        let runs = RunKeys::new(
            &key_prefix,
            self.runs_key_prefix,
            self.run_retention,
            self.runs_per_lock,
        )?;
        let board = BoardKeys::new(&key_prefix, runs.prefix(), self.board_key_prefix)?;
        Ok(Settings {
            board,
            runs,
            key_prefix,
            holder,
            channel: channel.into(),
            timeout: self.timeout,
            tls_root_certificates: self.tls_root_certificates,
            wait_for_replicas: self.wait_for_replicas,
        })
    }
}

impl RedisLockProviderBuilder<SingleServer> {
    /// Connects a provider to one server and checks that it answers.
    ///
    /// `url` is one server's, `redis://[[user]:password@]host:port[/db]` (`rediss://` with
    /// TLS), or a master's through Redis Sentinel:
    /// `redis+sentinel://[[user]:password@]host:port,host:port,…/master_name[/db]`
    /// (`rediss+sentinel://` with TLS to the sentinels and the master), its userinfo the
    /// master's; sentinels with a password of their own take it from the query:
    /// `?sentinel_password=…` (and `sentinel_username=…`). Through Sentinel the provider
    /// connects to the master the sentinels name, and after a failover to the new one: a call
    /// that finds the master gone (connection refused or lost, no answer in time) or demoted
    /// (`READONLY`) fails, and the calls after it fail at once until the sentinels name a
    /// master that answers as one (asked every 100 ms). See the crate docs for what a
    /// failover can lose and [`wait_for_replicas`](Self::wait_for_replicas).
    ///
    /// Or a Redis Cluster: `redis+cluster://[[user]:password@]host:port,host:port,…` (any of
    /// its nodes; `rediss+cluster://` with TLS). See [Redis Cluster](crate#redis-cluster) for
    /// its key layout and what it does not keep yet.
    ///
    /// ```no_run
    /// use shedlock_redis::RedisLockProvider;
    ///
    /// # async fn run() -> Result<(), shedlock_core::Error> {
    /// let provider = RedisLockProvider::builder()
    ///     .connect("redis+sentinel://:secret@10.0.0.1:26379,10.0.0.2:26379,10.0.0.3:26379/locks")
    ///     .await?;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the bad setting (`url`, `key_prefix`, `holder`,
    /// `timeout`, `runs_key_prefix`, `board_key_prefix`, `run_retention`, `runs_per_lock`,
    /// `wait_for_replicas`); [`Error::Store`] when the server cannot be reached or refuses
    /// the credentials, or no sentinel names a master that answers (the message never shows
    /// the password).
    pub async fn connect(self, url: &str) -> Result<RedisLockProvider, Error> {
        let settings = self.settings()?;
        RedisLockProvider::connect_with(settings, url).await
    }

    /// Grants wait until `replicas` replicas acknowledged them (`WAIT replicas timeout`, sent
    /// with the acquire script in one pipeline on a connection of its own): a grant that fewer
    /// replicas acknowledged within `timeout` is released again and answered with an
    /// [`Error::Store`] saying so, since a failover to a replica that lacks it would grant the
    /// lock again while its holder runs. Such a grant's tick is spent on the master and runs
    /// nowhere, unless a failover to a replica without it follows: at most once, not at least
    /// once.
    ///
    /// For a master with replicas (Sentinel, or a managed Redis that promotes one): with
    /// `replicas` = 1 and one replica, a failover promotes a replica that holds every grant
    /// answered. Acquisitions take a replication round trip longer (the batches of
    /// [`acquire_many`](shedlock_core::LockProvider::acquire_many) too, one `WAIT` per chunk);
    /// nothing else waits. `WAIT` makes the grant durable only as far as the replica is: see
    /// the crate docs.
    pub fn wait_for_replicas(mut self, replicas: u32, timeout: Duration) -> Self {
        self.wait_for_replicas = Some(WaitForReplicas { replicas, timeout });
        self
    }

    /// The same settings for a [`RedLockProvider`], with the algorithm's defaults.
    pub fn redlock(self) -> RedLockProviderBuilder {
        RedisLockProviderBuilder {
            key_prefix: self.key_prefix,
            holder: self.holder,
            timeout: self.timeout,
            release_channel: self.release_channel,
            hints: self.hints,
            runs_key_prefix: self.runs_key_prefix,
            run_retention: self.run_retention,
            runs_per_lock: self.runs_per_lock,
            board_key_prefix: self.board_key_prefix,
            tls_root_certificates: self.tls_root_certificates,
            wait_for_replicas: self.wait_for_replicas,
            kind: Majority::default(),
        }
    }
}

impl RedLockProviderBuilder {
    /// The allowance for clock-rate differences between masters, as a fraction of the
    /// lease (default 0.01, as published); 2 ms are added to it.
    pub fn clock_drift_factor(mut self, factor: f64) -> Self {
        self.kind.clock_drift_factor = factor;
        self
    }

    /// How often an acquisition that won some masters but no majority (several
    /// instances asking at the same moment split the votes) is retried: default 3. The
    /// instances break the tie by holder order: the first retries after one round, the others
    /// after two rounds and a random delay. A retry refuses a lock acquired since the call
    /// began, so it never takes over work another instance did meanwhile.
    pub fn retries(mut self, retries: u32) -> Self {
        self.kind.retries = retries;
        self
    }

    /// The longest random delay before such a retry, for the instances that let
    /// another go first: default 50 ms.
    pub fn retry_delay(mut self, delay: Duration) -> Self {
        self.kind.retry_delay = delay;
        self
    }

    /// Connects a RedLock provider to independent masters and checks that a majority answers.
    ///
    /// # Errors
    /// As [`RedisLockProviderBuilder::connect`]; also [`Error::InvalidConfig`] (`urls`) for an
    /// empty list or the same server twice, and (`clock_drift_factor`) outside `0..0.5`;
    /// [`Error::Store`] when fewer than a majority of the masters answer.
    pub async fn connect<I, S>(self, urls: I) -> Result<RedLockProvider, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let Majority {
            clock_drift_factor: drift,
            retries,
            retry_delay,
        } = self.kind;
        if !(0.0..0.5).contains(&drift) {
            return Err(Error::invalid_config(
                "clock_drift_factor",
                format!("must be at least 0 and below 0.5, got {drift}"),
            ));
        }
        if self.wait_for_replicas.is_some() {
            return Err(Error::invalid_config(
                "wait_for_replicas",
                "RedLock's masters are independent, without replicas to wait for",
            ));
        }
        let settings = self.settings()?;
        let urls: Vec<String> = urls.into_iter().map(|u| u.as_ref().to_owned()).collect();
        RedLockProvider::connect_with(settings, &urls, drift, retries, retry_delay).await
    }
}
