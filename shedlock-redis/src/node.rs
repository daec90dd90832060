//! One Redis server: a reconnecting multiplexed connection and the lock scripts on it.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, FromRedisValue, ScriptInvocation};
use shedlock_core::{Error, Tick};

use crate::error::{ServerError, ServerErrorKind};
use crate::scripts::{ACQUIRE, AcquireReply, EXTEND, RELEASE, STATE, UNDO, stored_number};
use crate::sentinel::{self, Sentinels};
use crate::time::tick_millis;

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
#[derive(Clone)]
pub(crate) struct Node {
    /// The server's client and connection; replaced only when Sentinel names a new master.
    link: Arc<RwLock<Link>>,
    /// The sentinels to ask after a failure, when the server is a Sentinel master.
    sentinels: Option<Arc<Sentinels>>,
    server: Arc<str>,
    timeout: Duration,
    /// The `WAIT` timeout of acquisitions that wait for replicas.
    wait_timeout: Duration,
    down: Arc<AtomicBool>,
}

/// A server's client and its reconnecting connection.
#[derive(Clone)]
struct Link {
    client: Client,
    connection: ConnectionManager,
    /// For acquisitions that wait for replicas: connected on first use only.
    waiting: ConnectionManager,
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
            client,
            connection,
            waiting,
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

/// One lock of an [acquire](Node::acquire) call.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub(crate) key: String,
    pub(crate) lease_ms: u64,
    /// How long before `TIME` an acquisition refuses the lock, ms.
    pub(crate) window_ms: u64,
    /// 0: the server picks the token (one server); else RedLock's proposal.
    pub(crate) proposed_token: u64,
    pub(crate) tick: Option<Tick>,
}

/// The keys and arguments of the acquire script for `claims` (see [`ACQUIRE`]).
pub(crate) fn acquire_arguments<'a>(
    holder: &str,
    tolerance_us: u64,
    claims: &'a [Claim],
) -> (Vec<&'a str>, Vec<String>) {
    let mut args = vec![holder.to_owned(), tolerance_us.to_string()];
    for claim in claims {
        args.extend([
            claim.lease_ms.to_string(),
            claim.window_ms.to_string(),
            claim.proposed_token.to_string(),
        ]);
        match claim.tick {
            Some(tick) => args.extend([
                tick_millis(&tick).to_string(),
                tick.spacing_millis().to_string(),
                tick.ahead_millis().to_string(),
            ]),
            None => args.extend([String::new(), "0".to_owned(), "0".to_owned()]),
        }
    }
    (
        claims.iter().map(|claim| claim.key.as_str()).collect(),
        args,
    )
}

/// Lease fields read by [`Node::state`]: holder, token, locked_at, lock_until, now (ms).
pub(crate) type StateParts = (String, u64, u64, u64, u64);

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
            server,
            timeout: settings.timeout,
            wait_timeout: settings.wait_timeout,
            down: Arc::default(),
        }))
    }

    /// The server as `redis://host:port/db` (`redis+sentinel://sentinels/name/db` through
    /// Sentinel), without credentials.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// The master's `host:port` as the sentinels named it last; `None` without Sentinel.
    pub(crate) fn sentinel_master(&self) -> Option<String> {
        self.sentinels.as_ref()?;
        Some(sentinel::address(&self.link().client))
    }

    fn link(&self) -> Link {
        self.link
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The shared connection to the server.
    fn connection(&self) -> ConnectionManager {
        self.link().connection
    }

    /// The client, for connections of other kinds (pub/sub).
    pub(crate) fn client(&self) -> Client {
        self.link().client
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
    pub(crate) fn waiting_connection(&self) -> ConnectionManager {
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
        if sentinel::address(&self.client()) != address {
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

    /// Runs the acquire script once for all of `claims` (in their order, one round trip),
    /// answering each: a proposal is taken if above the stored token and at most
    /// `tolerance_us` behind the server's clock. A call that fails fails every claim, each
    /// error naming the claim's key.
    pub(crate) async fn acquire(
        &self,
        holder: &str,
        tolerance_us: u64,
        claims: &[Claim],
    ) -> Vec<Result<AcquireReply, ServerError>> {
        if claims.is_empty() {
            return Vec::new();
        }
        let (keys, args) = acquire_arguments(holder, tolerance_us, claims);
        let mut invocation = ACQUIRE.prepare_invoke();
        for key in &keys {
            invocation.key(key);
        }
        for arg in &args {
            invocation.arg(arg);
        }
        let key = claims.first().map(|claim| claim.key.as_str());
        let replies = self.run::<Vec<Vec<redis::Value>>>(key, &invocation).await;
        self.acquire_answers(claims, replies)
    }

    /// Each claim's answer in the acquire script's `replies` (or the call's failure).
    pub(crate) fn acquire_answers(
        &self,
        claims: &[Claim],
        replies: Result<Vec<Vec<redis::Value>>, ServerError>,
    ) -> Vec<Result<AcquireReply, ServerError>> {
        let key = claims.first().map(|claim| claim.key.as_str());
        let replies: Vec<Vec<redis::Value>> = match replies {
            Ok(replies) if replies.len() == claims.len() => replies,
            Ok(replies) => {
                let reply = format!("{} answers to {} locks", replies.len(), claims.len());
                let failure = self.error(key, ServerErrorKind::UnexpectedReply(reply));
                return claims
                    .iter()
                    .map(|c| Err(failure.for_key(&c.key)))
                    .collect();
            }
            Err(failure) => {
                return claims
                    .iter()
                    .map(|c| Err(failure.for_key(&c.key)))
                    .collect();
            }
        };
        replies
            .iter()
            .zip(claims)
            .map(|(reply, claim)| {
                let kind = match AcquireReply::parse(reply) {
                    Some(Ok(answer)) => return Ok(answer),
                    Some(Err(text)) => ServerErrorKind::Script(text),
                    None => ServerErrorKind::UnexpectedReply(format!("{reply:?}")),
                };
                Err(self.error(Some(&claim.key), kind))
            })
            .collect()
    }

    /// Whether the live lease `(holder, token)` was released. Publishes `name` on `channel`
    /// (unless empty) when the lock became free.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn release(
        &self,
        key: &str,
        holder: &str,
        token: u64,
        at_least_ms: u64,
        channel: &str,
        name: &str,
    ) -> Result<bool, ServerError> {
        let mut invocation = RELEASE.prepare_invoke();
        invocation
            .key(key)
            .arg(holder)
            .arg(token)
            .arg(at_least_ms)
            .arg(channel)
            .arg(name);
        let released: i64 = self.run(Some(key), &invocation).await?;
        Ok(released == 1)
    }

    /// Takes back the grants `(key, token)` of `holder`'s failed RedLock attempts, in one
    /// round trip: per grant, whether it was still there.
    pub(crate) async fn undo(
        &self,
        holder: &str,
        grants: &[(&str, u64)],
    ) -> Result<Vec<bool>, ServerError> {
        let mut invocation = UNDO.prepare_invoke();
        invocation.arg(holder);
        for &(key, token) in grants {
            invocation.key(key).arg(token);
        }
        let key = grants.first().map(|&(key, _)| key);
        let undone: Vec<i64> = self.run(key, &invocation).await?;
        Ok(undone.into_iter().map(|undone| undone == 1).collect())
    }

    /// The new `lock_until` (ms) when the live lease `(holder, token)` was extended.
    pub(crate) async fn extend(
        &self,
        key: &str,
        holder: &str,
        token: u64,
        lease_ms: u64,
    ) -> Result<Option<u64>, ServerError> {
        let mut invocation = EXTEND.prepare_invoke();
        invocation.key(key).arg(holder).arg(token).arg(lease_ms);
        let reply: Vec<i64> = self.run(Some(key), &invocation).await?;
        match reply.as_slice() {
            [1, lock_until] => Ok(u64::try_from(*lock_until).ok()),
            [0] => Ok(None),
            _ => Err(self.error(
                Some(key),
                ServerErrorKind::UnexpectedReply(format!("{reply:?}")),
            )),
        }
    }

    /// The lease fields of `key`, or `None` when the key does not exist.
    pub(crate) async fn state(&self, key: &str) -> Result<Option<StateParts>, ServerError> {
        let mut invocation = STATE.prepare_invoke();
        invocation.key(key);
        let reply: Vec<Option<String>> = self.run(Some(key), &invocation).await?;
        if reply.is_empty() {
            return Ok(None);
        }
        let field = |i: usize| reply.get(i).and_then(Option::as_deref);
        let number = |i: usize, name: &'static str| {
            field(i)
                .and_then(stored_number)
                .ok_or_else(|| self.error(Some(key), ServerErrorKind::Corrupt(name)))
        };
        let holder = field(0)
            .ok_or_else(|| self.error(Some(key), ServerErrorKind::Corrupt("holder")))?
            .to_owned();
        Ok(Some((
            holder,
            number(1, "token")?,
            number(2, "locked_at")?,
            number(3, "lock_until")?,
            number(4, "TIME")?,
        )))
    }

    /// The server's clock (`TIME`), in milliseconds since the epoch.
    pub(crate) async fn time(&self) -> Result<u64, ServerError> {
        let mut connection = self.connection();
        let time = redis::cmd("TIME");
        let (seconds, micros): (u64, u64) =
            match tokio::time::timeout(self.timeout, time.query_async(&mut connection)).await {
                Ok(Ok(reply)) => reply,
                Ok(Err(error)) => return Err(self.error(None, ServerErrorKind::Redis(error))),
                Err(_) => return Err(self.error(None, ServerErrorKind::Timeout(self.timeout))),
            };
        Ok(seconds * 1000 + micros / 1000)
    }

    /// Every key matching `pattern` (`SCAN`, so the server is never blocked for long).
    pub(crate) async fn keys(&self, pattern: &str) -> Result<Vec<String>, ServerError> {
        let mut connection = self.connection();
        let mut cursor = 0u64;
        let mut keys = Vec::new();
        loop {
            let mut scan = redis::cmd("SCAN");
            scan.arg(cursor)
                .arg("MATCH")
                .arg(pattern)
                .arg("COUNT")
                .arg(500);
            let (next, mut batch): (u64, Vec<String>) =
                match tokio::time::timeout(self.timeout, scan.query_async(&mut connection)).await {
                    Ok(Ok(reply)) => reply,
                    Ok(Err(error)) => return Err(self.error(None, ServerErrorKind::Redis(error))),
                    Err(_) => return Err(self.error(None, ServerErrorKind::Timeout(self.timeout))),
                };
            keys.append(&mut batch);
            if next == 0 {
                keys.sort();
                keys.dedup();
                return Ok(keys);
            }
            cursor = next;
        }
    }
}
