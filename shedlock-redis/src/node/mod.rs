//! One Redis server (or the master Sentinel names): a reconnecting multiplexed connection, and
//! the lock scripts on it (`locks`).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, FromRedisValue, ScriptInvocation};
use shedlock_core::Error;

use crate::cluster;
use crate::error::{ServerError, ServerErrorKind};
use crate::sentinel::{self, Sentinels};

mod connection;
mod locks;

pub(crate) use connection::Connection;

pub(crate) use locks::{Claim, StateParts, acquire_arguments};

/// A connection to one server, shared by a provider and its clones.
///
/// The connection multiplexes (pipelines) every concurrent call over one socket and reconnects
/// by itself after an error. A server that did not answer (connection refused or lost, or no
/// answer within `timeout`) is marked down: calls fail at once, without waiting for the timeout
/// again, until a background probe finds it answering. For RedLock this keeps one dead master
/// from slowing every round down to the timeout, during which concurrent attempts would keep
/// colliding.
///
/// Through Sentinel ([`open_sentinel`](Node::open_sentinel)) the server is the master the
/// sentinels name: a call that finds it gone (connection refused or lost, no answer) or
/// demoted (`READONLY`) marks the node down, and the probe asks the sentinels for the master
/// until one answers as master, then connects to it.
///
/// On a cluster ([`open_cluster`](Node::open_cluster)) the cluster connection routes each call
/// to the master of its key's slot and follows failovers itself: nothing is marked down,
/// since one master's failure must not stop the slots of the others.
#[derive(Clone)]
pub(crate) struct Node {
    /// The server's client and connection; replaced only when Sentinel names a new master.
    link: Arc<RwLock<Link>>,
    /// The sentinels to ask after a failure, when the server is a Sentinel master.
    sentinels: Option<Arc<Sentinels>>,
    /// Whether the link is a cluster's.
    cluster: bool,
    /// On a cluster, a client of each node the URL names, for pub/sub (a message published
    /// on any node reaches every node's subscribers), taken in turn.
    seeds: Arc<[Client]>,
    next_seed: Arc<AtomicUsize>,
    server: Arc<str>,
    timeout: Duration,
    /// The `WAIT` timeout of acquisitions that wait for replicas.
    wait_timeout: Duration,
    down: Arc<AtomicBool>,
}

/// A server's client and its reconnecting connection.
#[derive(Clone)]
struct Link {
    /// The server's client, for pub/sub; none on a cluster.
    client: Option<Client>,
    connection: Connection,
    /// For acquisitions that wait for replicas: connected on first use only (one server).
    waiting: Connection,
}

impl Link {
    /// The connections of `client`, not yet connected: each request and connection attempt
    /// within `timeout` (a `WAIT` within `timeout` more than it waits), reconnecting by
    /// themselves after an error.
    fn new(client: Client, settings: &Connect<'_>) -> Result<Link, redis::RedisError> {
        let config = |response: Duration| {
            ConnectionManagerConfig::new()
                .set_response_timeout(Some(response))
                .set_connection_timeout(Some(settings.timeout))
                .set_number_of_retries(2)
                .set_max_delay(Duration::from_millis(500))
        };
        let connection =
            ConnectionManager::new_lazy_with_config(client.clone(), config(settings.timeout))?;
        let waiting = ConnectionManager::new_lazy_with_config(
            client.clone(),
            config(settings.timeout + settings.wait_timeout),
        )?;
        Ok(Link {
            client: Some(client),
            connection: Connection::Single(connection),
            waiting: Connection::Single(waiting),
        })
    }

    /// The connections to a cluster, connected now (to the nodes the client names, learning
    /// the others and the slots from them).
    async fn cluster(
        client: &redis::cluster::ClusterClient,
        settings: &Connect<'_>,
    ) -> Result<Link, redis::RedisError> {
        let connection = client.get_async_connection().await?;
        let waiting = if settings.wait_timeout.is_zero() {
            connection.clone()
        } else {
            let config = redis::cluster::ClusterConfig::new()
                .set_response_timeout(settings.timeout + settings.wait_timeout);
            client.get_async_connection_with_config(config).await?
        };
        Ok(Link {
            client: None,
            connection: Connection::Cluster(connection),
            waiting: Connection::Cluster(waiting),
        })
    }
}

/// How a node connects: what it takes of the builder's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Connect<'a> {
    /// Per command and per connection attempt.
    pub(crate) timeout: Duration,
    /// PEM root certificates to trust instead of the system's, for `rediss://`.
    pub(crate) tls_root_certificates: Option<&'a [u8]>,
    /// How long an acquisition's `WAIT` for replicas may take (zero: none waits).
    pub(crate) wait_timeout: Duration,
}

/// The client of `url`: TLS for `rediss://` (with the builder's root certificates, if any).
fn client(url: &str, settings: &Connect<'_>) -> Result<Client, Error> {
    let tls_url = url
        .trim_start()
        .to_ascii_lowercase()
        .starts_with("rediss://");
    if !tls_url && settings.tls_root_certificates.is_some() {
        return Err(Error::invalid_config(
            "tls_root_certificates",
            "given for a redis:// URL: use rediss:// for TLS",
        ));
    }
    if tls_url && !cfg!(feature = "tls") {
        return Err(Error::invalid_config(
            "url",
            "rediss:// needs the `tls` feature of shedlock-redis (on by default)",
        ));
    }
    let parse_error = |error: redis::RedisError| {
        Error::invalid_config("url", format!("not a Redis URL: {error}"))
    };
    #[cfg(feature = "tls")]
    if tls_url {
        // rustls needs a crypto provider; ring unless the program installed another.
        let _ = rustls::crypto::ring::default_provider().install_default();
        if let Some(roots) = settings.tls_root_certificates {
            let certificates = redis::TlsCertificates {
                client_tls: None,
                root_cert: Some(roots.to_vec()),
            };
            return Client::build_with_tls(url, certificates).map_err(|error| {
                Error::invalid_config(
                    "tls_root_certificates",
                    format!("not usable with this URL: {error}"),
                )
            });
        }
    }
    Client::open(url).map_err(parse_error)
}

/// How often a server marked down is probed.
const PROBE_INTERVAL: Duration = Duration::from_millis(100);

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("server", &self.server)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Node {
    /// Parses `url` and prepares the connection, without connecting yet.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`url`) when the URL does not parse, or is `rediss://` without
    /// the `tls` feature; (`tls_root_certificates`) when they are given for a `redis://` URL
    /// or do not parse. The message never repeats the URL, which may hold a password.
    pub(crate) fn open(url: &str, settings: &Connect<'_>) -> Result<Node, Error> {
        let timeout = settings.timeout;
        let client = client(url, settings)?;
        let info = client.get_connection_info();
        let scheme = match info.addr() {
            redis::ConnectionAddr::TcpTls { .. } => "rediss",
            _ => "redis",
        };
        let server: Arc<str> =
            format!("{scheme}://{}/{}", info.addr(), info.redis_settings().db()).into();
        let link = Link::new(client, settings).map_err(|error| {
            Error::invalid_config("url", format!("cannot use {server}: {error}"))
        })?;
        Ok(Node {
            link: Arc::new(RwLock::new(link)),
            sentinels: None,
            cluster: false,
            seeds: Arc::from([]),
            next_seed: Arc::default(),
            server,
            timeout,
            wait_timeout: settings.wait_timeout,
            down: Arc::default(),
        })
    }

    /// Reads a `redis+sentinel://` URL and connects to the master its sentinels name now.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] as [`Sentinels::open`] reads the URL; the sentinels' or the
    /// master's failure (none answers, none names a master that is up) as a [`ServerError`].
    pub(crate) async fn open_sentinel(
        url: &str,
        settings: &Connect<'_>,
    ) -> Result<Result<Node, ServerError>, Error> {
        let sentinels = Sentinels::open(url, settings)?;
        let server: Arc<str> = sentinels.shown().into();
        let failed = |kind| ServerError::new(&server, None, kind);
        let client = match sentinels.master().await {
            Ok(client) => client,
            Err(kind) => return Ok(Err(failed(kind))),
        };
        let link = match Link::new(client, settings) {
            Ok(link) => link,
            Err(error) => return Ok(Err(failed(ServerErrorKind::Redis(error)))),
        };
        Ok(Ok(Node {
            link: Arc::new(RwLock::new(link)),
            sentinels: Some(Arc::new(sentinels)),
            cluster: false,
            seeds: Arc::from([]),
            next_seed: Arc::default(),
            server,
            timeout: settings.timeout,
            wait_timeout: settings.wait_timeout,
            down: Arc::default(),
        }))
    }

    /// Reads a `redis+cluster://` URL and connects to the cluster.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] as [`cluster::client`] reads the URL; the nodes' failure (none
    /// answers, or none knows the cluster) as a [`ServerError`].
    pub(crate) async fn open_cluster(
        url: &str,
        settings: &Connect<'_>,
    ) -> Result<Result<Node, ServerError>, Error> {
        let (client, shown, urls) = cluster::client(url, settings)?;
        let seeds = urls
            .iter()
            .map(|url| self::client(url, settings))
            .collect::<Result<Arc<[Client]>, Error>>()?;
        let server: Arc<str> = shown.into();
        let link = match Link::cluster(&client, settings).await {
            Ok(link) => link,
            Err(error) => {
                let kind = ServerErrorKind::Redis(error);
                return Ok(Err(ServerError::new(&server, None, kind)));
            }
        };
        Ok(Ok(Node {
            link: Arc::new(RwLock::new(link)),
            sentinels: None,
            cluster: true,
            seeds,
            next_seed: Arc::default(),
            server,
            timeout: settings.timeout,
            wait_timeout: settings.wait_timeout,
            down: Arc::default(),
        }))
    }

    /// Whether this is a cluster's node: keys carry hash tags, batches go by slot.
    pub(crate) fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// The server as `redis://host:port/db` (`redis+sentinel://sentinels/name/db` through
    /// Sentinel, `redis+cluster://nodes` on a cluster), without credentials.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// The master's `host:port` as the sentinels named it last; `None` without Sentinel.
    pub(crate) fn sentinel_master(&self) -> Option<String> {
        self.sentinels.as_ref()?;
        self.link().client.as_ref().map(sentinel::address)
    }

    fn link(&self) -> Link {
        self.link
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The shared connection to the server.
    fn connection(&self) -> Connection {
        self.link().connection
    }

    /// The client, for connections of other kinds (pub/sub); on a cluster, each call the
    /// next of the nodes the URL names (so a subscription that failed tries another).
    pub(crate) fn client(&self) -> Option<Client> {
        if self.seeds.is_empty() {
            return self.link().client;
        }
        let next = self.next_seed.fetch_add(1, Ordering::Relaxed);
        self.seeds.get(next % self.seeds.len()).cloned()
    }

    /// Runs `invocation` (each request within the timeout), loading the script on first use (`EVALSHA`, then
    /// `SCRIPT LOAD` and `EVALSHA` again on `NOSCRIPT`).
    pub(crate) async fn run<T: FromRedisValue>(
        &self,
        key: Option<&str>,
        invocation: &ScriptInvocation<'_>,
    ) -> Result<T, ServerError> {
        if self.down.load(Ordering::Relaxed) {
            return Err(self.error(key, ServerErrorKind::Down));
        }
        let mut connection = self.connection();
        // The connection's own response and connect timeouts bound the call: no second timer.
        invocation
            .invoke_async(&mut connection)
            .await
            .map_err(|error| self.failed(key, error))
    }

    /// A call's `error` as the node's failure; marks the node down when the server did not
    /// answer, or (through Sentinel) is no master any more.
    pub(crate) fn failed(&self, key: Option<&str>, error: redis::RedisError) -> ServerError {
        if self.cluster {
            let kind = if error.is_timeout() {
                ServerErrorKind::Timeout(self.timeout)
            } else {
                ServerErrorKind::Redis(error)
            };
            return self.error(key, kind);
        }
        if error.is_timeout() {
            self.mark_down();
            return self.error(key, ServerErrorKind::Timeout(self.timeout));
        }
        if error.is_io_error() || error.is_connection_dropped() || self.demoted(&error) {
            self.mark_down();
        }
        self.error(key, ServerErrorKind::Redis(error))
    }

    /// The connection of acquisitions that wait for replicas (`WAIT` blocks the connection it
    /// runs on, so it has one of its own).
    pub(crate) fn waiting_connection(&self) -> Connection {
        self.link().waiting
    }

    /// Whether `error` says that the Sentinel master this node uses is one no more: a replica
    /// refuses writes with `READONLY`.
    fn demoted(&self, error: &redis::RedisError) -> bool {
        self.sentinels.is_some()
            && (error.code() == Some("READONLY") || error.to_string().contains("READONLY"))
    }

    /// Through Sentinel: connects to the master the sentinels name now, unless it is the one
    /// this node uses already; then checks that it answers.
    async fn follow_master(&self) -> Result<(), ServerError> {
        let settings = Connect {
            timeout: self.timeout,
            tls_root_certificates: None,
            wait_timeout: self.wait_timeout,
        };
        let Some(sentinels) = &self.sentinels else {
            return self.ping().await;
        };
        let master = sentinels
            .master()
            .await
            .map_err(|kind| self.error(None, kind))?;
        let address = sentinel::address(&master);
        if self.client().as_ref().map(sentinel::address) != Some(address.clone()) {
            let link = Link::new(master, &settings)
                .map_err(|error| self.error(None, ServerErrorKind::Redis(error)))?;
            *self.link.write().unwrap_or_else(PoisonError::into_inner) = link;
            tracing::info!(
                server = &*self.server,
                master = address.as_str(),
                "Redis Sentinel named a new master; connected to it"
            );
        }
        self.ping().await
    }

    /// Fails calls at once until a probe gets an answer again (through Sentinel: from the
    /// master the sentinels name then).
    fn mark_down(&self) {
        if self.down.swap(true, Ordering::Relaxed) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            self.down.store(false, Ordering::Relaxed);
            return;
        };
        let node = self.clone();
        runtime.spawn(async move {
            loop {
                tokio::time::sleep(PROBE_INTERVAL).await;
                if node.follow_master().await.is_ok() || Arc::strong_count(&node.down) == 1 {
                    // Answering again, or the provider is gone.
                    node.down.store(false, Ordering::Relaxed);
                    return;
                }
            }
        });
    }

    pub(crate) fn error(&self, key: Option<&str>, kind: ServerErrorKind) -> ServerError {
        ServerError::new(&self.server, key, kind)
    }

    /// Checks that the server answers (and accepts the credentials).
    pub(crate) async fn ping(&self) -> Result<(), ServerError> {
        let mut connection = self.connection();
        let ping = redis::cmd("PING");
        match tokio::time::timeout(
            self.timeout.max(Duration::from_secs(2)),
            ping.query_async::<String>(&mut connection),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(error)) => Err(self.error(None, ServerErrorKind::Redis(error))),
            Err(_) => Err(self.error(None, ServerErrorKind::Timeout(self.timeout))),
        }
    }

    /// Warns when the server may evict lock hashes: under an `allkeys-*` `maxmemory-policy`
    /// Redis deletes keys without an expiry too when memory runs short, and a lock hash
    /// evicted during its lease is granted again while its holder still runs. A server that
    /// refuses `CONFIG GET` (managed services often do) is not checked.
    pub(crate) async fn warn_if_evicting(&self) {
        let mut connection = self.connection();
        let mut get = redis::cmd("CONFIG");
        get.arg("GET").arg("maxmemory-policy");
        let reply = tokio::time::timeout(
            self.timeout,
            get.query_async::<std::collections::HashMap<String, String>>(&mut connection),
        )
        .await;
        match reply {
            Ok(Ok(config)) => {
                if let Some(policy) = config
                    .get("maxmemory-policy")
                    .filter(|policy| policy.starts_with("allkeys-"))
                {
                    tracing::warn!(
                        server = &*self.server,
                        policy = policy.as_str(),
                        "Redis may evict lock hashes (maxmemory-policy {policy}): a lock evicted \
                         during its lease is granted again while its holder runs; use noeviction \
                         or a volatile-* policy"
                    );
                }
            }
            Ok(Err(error)) => tracing::debug!(
                server = &*self.server,
                %error,
                "could not read maxmemory-policy"
            ),
            Err(_) => tracing::debug!(
                server = &*self.server,
                "could not read maxmemory-policy in time"
            ),
        }
    }
}
