//! Opening a node: on one server (its URL), through Sentinel (the master its sentinels name,
//! and again after a failover), or on a cluster; the connections it keeps to them.

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use redis::Client;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use shedlock_core::Error;

use super::{Connection, Node};
use crate::cluster;
use crate::error::{ServerError, ServerErrorKind};
use crate::sentinel::{self, Sentinels};

/// A server's client and its reconnecting connection.
#[derive(Clone)]
pub(super) struct Link {
    /// The server's client, for pub/sub; none on a cluster.
    pub(super) client: Option<Client>,
    pub(super) connection: Connection,
    /// For acquisitions that wait for replicas: connected on first use only (one server).
    pub(super) waiting: Connection,
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
                // A reconnection's pauses stay short, so a server back from an outage is
                // found within about this long by the probe that waits on it (the next due
                // tick 0.1 s after the return was lost with 500 ms).
                .set_max_delay(Duration::from_millis(100))
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

    /// Whether `error` says that the Sentinel master this node uses is one no more: a replica
    /// refuses writes with `READONLY`.
    pub(super) fn demoted(&self, error: &redis::RedisError) -> bool {
        self.sentinels.is_some()
            && (error.code() == Some("READONLY") || error.to_string().contains("READONLY"))
    }

    /// Through Sentinel: connects to the master the sentinels name now, unless it is the one
    /// this node uses already; then checks that it answers.
    pub(super) async fn follow_master(&self) -> Result<(), ServerError> {
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
}
