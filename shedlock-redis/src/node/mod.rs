//! One Redis server, the master Sentinel names, or a cluster: the connection calls go out on
//! (`connection`), how it is opened and follows a failover (`open`), and the lock scripts on
//! it (`locks`).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use redis::{Client, FromRedisValue, ScriptInvocation};

use crate::error::{ServerError, ServerErrorKind};
use crate::sentinel::{self, Sentinels};

mod connection;
mod locks;
mod open;

pub(crate) use connection::Connection;
pub(crate) use locks::{Claim, StateParts, acquire_arguments, scan_command};
pub(crate) use open::Connect;
use open::Link;

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

/// How often a server marked down is probed: a refused connection costs the probe nothing,
/// and a server back from an outage is used again within about this long.
const PROBE_INTERVAL: Duration = Duration::from_millis(50);

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("server", &self.server)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Node {
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

    /// Whether calls fail at once: the server did not answer lately and no probe got an
    /// answer since.
    pub(crate) fn is_down(&self) -> bool {
        self.down.load(Ordering::Relaxed)
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
                // A connection that failed answers its next call with that failure and only
                // then connects again: a second try is the first on a new connection.
                let answered = match node.follow_master().await {
                    Ok(()) => true,
                    Err(_) => node.follow_master().await.is_ok(),
                };
                if answered || Arc::strong_count(&node.down) == 1 {
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
