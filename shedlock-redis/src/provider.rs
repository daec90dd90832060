//! The provider on one Redis server.

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::{
    Error, LockConfiguration, LockInspector, LockLease, LockProvider, Operation, async_trait,
};
use tokio::sync::broadcast;

use crate::RedisLockProviderBuilder;
use crate::batch;
use crate::builder::Settings;
use crate::cluster::{self, is_cluster_url};
use crate::error::store_error;
use crate::hints::ReleaseHints;
use crate::names::validate_holder;
use crate::node::{Claim, Node};
use crate::scripts::AcquireReply;
use crate::sentinel::is_sentinel_url;
use crate::time::{millis, system_time};

/// Locks on one Redis server, on Redis's clock, with fencing tokens and release hints.
///
/// Each operation is one Lua script, one round trip (`EVALSHA`; the script is loaded once per
/// server on `NOSCRIPT`):
/// - **acquire** grants the lock when its lease ended (`lock_until <= TIME`) and, if asked,
///   nobody acquired it within the window, with the token `max(token + 1, TIME in µs)` set in
///   the same script; [for a tick](LockConfiguration::for_tick), only if the tick follows the
///   hash's `last_tick` by its spacing and is within its ahead bound of `TIME`, and the grant
///   keeps it as `last_tick`;
/// - **release** matches holder **and** token and ends the lease at
///   `max(now, locked_at + lock_at_least_for)`, publishing the name on the
///   [release channel](Self::release_channel) when the lock became free;
/// - **extend** matches holder and token and moves `lock_until` to `now + lock_at_most_for`;
/// - **acquire_many** runs the acquire script once for up to 500 locks, each decided as
///   acquire decides it (see [batched claims](crate#batched-claims)).
///
/// A lock is one hash, `<key prefix><name>` (on a Redis Cluster `<key prefix>{<name>}`), that
/// never expires: see the crate docs for why,
/// for what tokens guarantee when Redis loses its data, and for what a replica failover
/// does (it can grant a lock twice). Clones share the connection.
///
/// It is its own [`LockInspector`]: the hashes under the key prefix read as
/// [`LockRecord`](shedlock_core::LockRecord)s on the server's clock, and an operator's
/// `release_lock` ends a lease at once.
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_core::{LockConfiguration, LockProvider};
/// use shedlock_redis::RedisLockProvider;
///
/// # async fn run() -> Result<(), shedlock_core::Error> {
/// let provider = RedisLockProvider::connect("redis://127.0.0.1:6379").await?;
/// let config = LockConfiguration::new("nightly_report", Duration::from_secs(600), Duration::ZERO)?;
/// if let Some(lease) = provider.acquire(&config).await? {
///     println!("running with fencing token {}", lease.fencing_token());
///     provider.release(&lease).await?;
/// }
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RedisLockProvider {
    pub(crate) node: Node,
    pub(crate) settings: Settings,
    hints: Arc<ReleaseHints>,
}

impl RedisLockProvider {
    /// Connects to the server at `url` (`redis://[:password@]host:port[/db]`, or `rediss://`
    /// with TLS when the `redis` crate is built with it) with the default settings.
    ///
    /// # Errors
    /// See [`RedisLockProviderBuilder::connect`].
    pub async fn connect(url: &str) -> Result<Self, Error> {
        Self::builder().connect(url).await
    }

    /// Configures key prefix, holder, timeout and hints; see [`RedisLockProviderBuilder`].
    pub fn builder() -> RedisLockProviderBuilder {
        RedisLockProviderBuilder::default()
    }

    pub(crate) async fn connect_with(settings: Settings, url: &str) -> Result<Self, Error> {
        let mut settings = settings;
        let node = if is_cluster_url(url) {
            settings.runs = settings.runs.for_cluster();
            Node::open_cluster(url, &settings.connect())
                .await?
                .map_err(|e| store_error(Operation::Read, "*", e))?
        } else if is_sentinel_url(url) {
            Node::open_sentinel(url, &settings.connect())
                .await?
                .map_err(|e| store_error(Operation::Read, "*", e))?
        } else {
            Node::open(url, &settings.connect())?
        };
        node.ping()
            .await
            .map_err(|e| store_error(Operation::Read, "*", e))?;
        node.warn_if_evicting().await;
        Ok(RedisLockProvider {
            node,
            settings,
            hints: Arc::default(),
        })
    }

    /// The same server acting as another holder (another instance), sharing the connection.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`holder`) when empty, longer than 255 characters or holding
    /// control characters.
    pub fn with_holder(&self, holder: impl Into<String>) -> Result<Self, Error> {
        let mut provider = self.clone();
        provider.settings.holder = validate_holder(holder.into())?;
        Ok(provider)
    }

    /// The same server, connection, prefixes and holder, keeping run records for
    /// `retention` and `runs_per_lock` per lock (see
    /// [`run_retention`](crate::RedisLockProviderBuilder::run_retention)).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`run_retention`, `runs_per_lock`) as the builder checks them.
    pub fn with_run_retention(
        &self,
        retention: Duration,
        runs_per_lock: u32,
    ) -> Result<Self, Error> {
        let mut provider = self.clone();
        provider.settings.runs = self.settings.runs.keeping(retention, runs_per_lock)?;
        Ok(provider)
    }

    /// The server, as `redis://host:port/db` (`redis+sentinel://sentinels/master_name/db`
    /// through Sentinel), never with the password.
    pub fn server(&self) -> &str {
        self.node.server()
    }

    /// Through Sentinel, the master the provider uses (`host:port`, as the sentinels named it
    /// last); `None` on one server.
    pub fn sentinel_master(&self) -> Option<String> {
        self.node.sentinel_master()
    }

    /// The prefix of every lock key.
    pub fn key_prefix(&self) -> &str {
        &self.settings.key_prefix
    }

    /// The prefix of the keys of the fleet's [board](shedlock_core::Board) (`board:<key
    /// prefix>` unless [configured](RedisLockProviderBuilder::board_key_prefix)).
    pub fn board_key_prefix(&self) -> &str {
        self.settings.board.prefix()
    }

    /// The key of the hash that holds lock `lock_name`: `<key prefix><lock_name>`, on a
    /// Redis Cluster `<key prefix>{<lock_name>}` (the name is the hash tag).
    pub fn key(&self, lock_name: &str) -> String {
        if self.node.is_cluster() {
            cluster::lock_key(&self.settings.key_prefix, lock_name)
        } else {
            format!("{}{lock_name}", self.settings.key_prefix)
        }
    }

    /// The channel on which releases publish the name of a lock that became free, unless built
    /// [`without_release_hints`](RedisLockProviderBuilder::without_release_hints).
    pub fn release_channel(&self) -> Option<&str> {
        Some(&*self.settings.channel).filter(|c| !c.is_empty())
    }

    /// What the acquire script needs of `config`, its window read now.
    fn claim(&self, config: &LockConfiguration) -> Claim {
        Claim {
            key: self.key(config.name()),
            lease_ms: millis(config.lock_at_most_for()),
            window_ms: millis(config.acquired_within_window()),
            proposed_token: 0,
            tick: config.tick(),
        }
    }

    /// Takes `configs` in one script call, answering each in their order.
    async fn acquire_chunk(
        &self,
        configs: &[&LockConfiguration],
    ) -> Vec<Result<Option<LockLease>, Error>> {
        let claims: Vec<Claim> = configs.iter().map(|config| self.claim(config)).collect();
        let replies = match self.settings.wait_for_replicas {
            None => self.node.acquire(&self.settings.holder, 0, &claims).await,
            Some(wait) => self.acquire_acknowledged(configs, &claims, wait).await,
        };
        configs
            .iter()
            .zip(replies)
            .map(|(config, reply)| {
                let reply = reply.map_err(|e| store_error(Operation::Acquire, config.name(), e))?;
                Ok(match reply {
                    AcquireReply::Granted {
                        token,
                        now_ms,
                        lock_until_ms,
                        ..
                    } => Some(LockLease::new(
                        config,
                        Arc::clone(&self.settings.holder),
                        token,
                        system_time(now_ms),
                        system_time(lock_until_ms),
                    )),
                    AcquireReply::Refused { .. }
                    | AcquireReply::TokenBehind { .. }
                    | AcquireReply::TickRefused { .. } => None,
                })
            })
            .collect()
    }
}

#[async_trait]
impl LockProvider for RedisLockProvider {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        let mut answers = self.acquire_chunk(&[config]).await;
        answers.pop().unwrap_or(Ok(None))
    }

    /// One script call (`EVALSHA`) per [chunk](crate#batched-claims) of the batch, in name
    /// order: each lock decided as [`acquire`](Self::acquire) decides it, on one `TIME` read.
    async fn acquire_many(
        &self,
        configs: &[LockConfiguration],
    ) -> Vec<Result<Option<LockLease>, Error>> {
        if self.node.is_cluster() {
            return batch::by_slot(
                configs,
                |name| self.key(name),
                |asked| async move { self.acquire_chunk(&asked).await },
            )
            .await;
        }
        batch::in_chunks(
            configs,
            |asked| async move { self.acquire_chunk(&asked).await },
        )
        .await
    }

    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        self.node
            .release(
                &self.key(lease.name()),
                &self.settings.holder,
                lease.fencing_token(),
                millis(lease.lock_at_least_for()),
                &self.settings.channel,
                lease.name(),
            )
            .await
            .map_err(|e| store_error(Operation::Release, lease.name(), e))
    }

    async fn extend(
        &self,
        lease: &LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<LockLease>, Error> {
        let extended = self
            .node
            .extend(
                &self.key(lease.name()),
                &self.settings.holder,
                lease.fencing_token(),
                millis(lock_at_most_for),
            )
            .await
            .map_err(|e| store_error(Operation::Extend, lease.name(), e))?;
        Ok(extended.map(|lock_until| {
            lease.extended(system_time(lock_until), lock_at_most_for, lock_at_least_for)
        }))
    }

    fn run_log(&self) -> Option<&dyn shedlock_core::RunLog> {
        Some(self)
    }

    fn holder(&self) -> &str {
        &self.settings.holder
    }

    fn release_hints(&self) -> Option<broadcast::Receiver<Arc<str>>> {
        let channel = self.release_channel()?;
        self.hints
            .subscribe(std::slice::from_ref(&self.node), &Arc::from(channel))
    }

    fn inspector(&self) -> Option<&dyn LockInspector> {
        Some(self)
    }

    fn board(&self) -> Option<&dyn shedlock_core::Board> {
        Some(self)
    }
}
