//! One Redis server: a reconnecting multiplexed connection and the lock scripts on it.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{Client, FromRedisValue, ScriptInvocation};
use shedlock_core::{Error, Tick};

use crate::error::{ServerError, ServerErrorKind};
use crate::scripts::{ACQUIRE, AcquireReply, EXTEND, RELEASE, STATE, UNDO, stored_number};
use crate::time::tick_millis;

/// A connection to one server, shared by a provider and its clones.
///
/// The connection multiplexes (pipelines) every concurrent call over one socket and reconnects
/// by itself after an error. A server that did not answer (connection refused or lost, or no
/// answer within `timeout`) is marked down: calls fail at once, without waiting for the timeout
/// again, until a background probe finds it answering. For RedLock this keeps one dead master
/// from slowing every round down to the timeout, during which concurrent attempts would keep
/// colliding.
#[derive(Clone)]
pub(crate) struct Node {
    client: Client,
    connection: ConnectionManager,
    server: Arc<str>,
    timeout: Duration,
    down: Arc<AtomicBool>,
}

/// How a node connects: what it takes of the builder's settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Connect<'a> {
    /// Per command and per connection attempt.
    pub(crate) timeout: Duration,
    /// PEM root certificates to trust instead of the system's, for `rediss://`.
    pub(crate) tls_root_certificates: Option<&'a [u8]>,
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
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(timeout))
            .set_connection_timeout(Some(timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let connection =
            ConnectionManager::new_lazy_with_config(client.clone(), config).map_err(|error| {
                Error::invalid_config("url", format!("cannot use {server}: {error}"))
            })?;
        Ok(Node {
            client,
            connection,
            server,
            timeout,
            down: Arc::default(),
        })
    }

    /// The server as `redis://host:port/db`, without credentials.
    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// The client, for connections of other kinds (pub/sub).
    pub(crate) fn client(&self) -> &Client {
        &self.client
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
        let mut connection = self.connection.clone();
        // The connection's own response and connect timeouts bound the call: no second timer.
        match invocation.invoke_async(&mut connection).await {
            Ok(reply) => Ok(reply),
            Err(error) => {
                if error.is_timeout() {
                    self.mark_down();
                    return Err(self.error(key, ServerErrorKind::Timeout(self.timeout)));
                }
                if error.is_io_error() || error.is_connection_dropped() {
                    self.mark_down();
                }
                Err(self.error(key, ServerErrorKind::Redis(error)))
            }
        }
    }

    /// Fails calls at once until a probe gets an answer again.
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
                if node.ping().await.is_ok() || Arc::strong_count(&node.down) == 1 {
                    // Answering again, or the provider is gone.
                    node.down.store(false, Ordering::Relaxed);
                    return;
                }
            }
        });
    }

    fn error(&self, key: Option<&str>, kind: ServerErrorKind) -> ServerError {
        ServerError::new(&self.server, key, kind)
    }

    /// Checks that the server answers (and accepts the credentials).
    pub(crate) async fn ping(&self) -> Result<(), ServerError> {
        let mut connection = self.connection.clone();
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
        let mut connection = self.connection.clone();
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
        let mut invocation = ACQUIRE.prepare_invoke();
        invocation.arg(holder).arg(tolerance_us);
        for claim in claims {
            invocation
                .key(&claim.key)
                .arg(claim.lease_ms)
                .arg(claim.window_ms)
                .arg(claim.proposed_token);
            match claim.tick {
                Some(tick) => invocation
                    .arg(tick_millis(&tick))
                    .arg(tick.spacing_millis())
                    .arg(tick.ahead_millis()),
                None => invocation.arg("").arg(0).arg(0),
            };
        }
        let key = claims.first().map(|claim| claim.key.as_str());
        let replies: Vec<Vec<redis::Value>> =
            match self.run::<Vec<Vec<redis::Value>>>(key, &invocation).await {
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
        let mut connection = self.connection.clone();
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
        let mut connection = self.connection.clone();
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
