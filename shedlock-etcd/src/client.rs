//! The connection to the cluster: one lazily connected gRPC channel per endpoint, the auth
//! token shared by every clone, a timeout on every request, and failover to the next endpoint
//! when one does not answer.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::{Mutex, RwLock};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic_prost::ProstCodec;

use crate::error::EtcdError;
use crate::wire;

/// A user and password for etcd's authentication. `Debug` shows the user only.
#[derive(Clone)]
pub(crate) struct Credentials {
    pub(crate) user: String,
    pub(crate) password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// How to reach the cluster, checked by the builders.
#[derive(Clone)]
pub(crate) struct Connection {
    pub(crate) endpoints: Vec<String>,
    pub(crate) credentials: Option<Credentials>,
    pub(crate) request_timeout: Duration,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<tonic::transport::ClientTlsConfig>,
}

impl fmt::Debug for Connection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Connection");
        d.field("endpoints", &self.endpoints)
            .field("credentials", &self.credentials)
            .field("request_timeout", &self.request_timeout);
        #[cfg(feature = "tls")]
        d.field("tls", &self.tls.is_some());
        d.finish()
    }
}

/// A client of the cluster. Clones share channels and token.
#[derive(Clone)]
pub(crate) struct Client {
    inner: Arc<Inner>,
}

struct Inner {
    endpoints: Vec<String>,
    channels: Vec<Channel>,
    /// The endpoint requests go to first; moves on when it fails.
    current: AtomicUsize,
    credentials: Option<Credentials>,
    token: RwLock<Option<AsciiMetadataValue>>,
    /// One token refresh at a time.
    refreshing: Mutex<()>,
    timeout: Duration,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("endpoints", &self.inner.endpoints)
            .field(
                "user",
                &self.inner.credentials.as_ref().map(|c| c.user.as_str()),
            )
            .field("request_timeout", &self.inner.timeout)
            .finish_non_exhaustive()
    }
}

/// Whether a request may be sent again after a failure whose outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Retry {
    /// Reads, lease grants and revokes: sending twice does no harm.
    Idempotent,
    /// Transactions: only when the request cannot have reached a member (connect failure).
    IfNotSent,
}

const KV_RANGE: &str = "/etcdserverpb.KV/Range";
const KV_TXN: &str = "/etcdserverpb.KV/Txn";
const LEASE_GRANT: &str = "/etcdserverpb.Lease/LeaseGrant";
const LEASE_REVOKE: &str = "/etcdserverpb.Lease/LeaseRevoke";
#[cfg(test)]
const LEASE_LEASES: &str = "/etcdserverpb.Lease/LeaseLeases";
const LEASE_KEEP_ALIVE: &str = "/etcdserverpb.Lease/LeaseKeepAlive";
const WATCH: &str = "/etcdserverpb.Watch/Watch";
const AUTHENTICATE: &str = "/etcdserverpb.Auth/Authenticate";

impl Client {
    /// Channels to every endpoint (connected on first use) and, with credentials, a first
    /// token: so wrong credentials or an unreachable cluster fail here.
    pub(crate) async fn connect(connection: &Connection) -> Result<Client, EtcdError> {
        let mut channels = Vec::with_capacity(connection.endpoints.len());
        for url in &connection.endpoints {
            let endpoint = Endpoint::from_shared(url.clone())
                .map_err(|e| EtcdError::Endpoint {
                    endpoint: url.clone(),
                    message: e.to_string(),
                })?
                .connect_timeout(connection.request_timeout)
                .tcp_nodelay(true)
                .http2_keep_alive_interval(Duration::from_secs(10))
                .keep_alive_timeout(connection.request_timeout);
            #[cfg(feature = "tls")]
            let endpoint = match &connection.tls {
                Some(tls) => endpoint
                    .tls_config(tls.clone())
                    .map_err(|e| EtcdError::Endpoint {
                        endpoint: url.clone(),
                        message: e.to_string(),
                    })?,
                None => endpoint,
            };
            channels.push(endpoint.connect_lazy());
        }
        let client = Client {
            inner: Arc::new(Inner {
                endpoints: connection.endpoints.clone(),
                channels,
                current: AtomicUsize::new(0),
                credentials: connection.credentials.clone(),
                token: RwLock::new(None),
                refreshing: Mutex::new(()),
                timeout: connection.request_timeout,
            }),
        };
        if client.inner.credentials.is_some() {
            client.refresh_token(None).await?;
        } else {
            // Any read proves that a member answers.
            client
                .range(wire::RangeRequest {
                    key: b"\0".to_vec(),
                    limit: 1,
                    keys_only: true,
                    ..Default::default()
                })
                .await?;
        }
        Ok(client)
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        self.inner.timeout
    }

    pub(crate) async fn range(
        &self,
        request: wire::RangeRequest,
    ) -> Result<wire::RangeResponse, EtcdError> {
        self.unary(KV_RANGE, request, Retry::Idempotent).await
    }

    pub(crate) async fn txn(
        &self,
        request: wire::TxnRequest,
    ) -> Result<wire::TxnResponse, EtcdError> {
        self.unary(KV_TXN, request, Retry::IfNotSent).await
    }

    /// A transaction that writes keys on `leases` (granted for it; 0: none): when it fails or
    /// its compares fail, the leases are revoked in the background. Whether a failed
    /// transaction was applied is unknown, and the leases end its keys at the latest when
    /// they run out; revoking them ends them at once.
    pub(crate) async fn txn_on_leases(
        &self,
        request: wire::TxnRequest,
        leases: &[i64],
    ) -> Result<wire::TxnResponse, EtcdError> {
        let response = self.txn(request).await;
        if !matches!(&response, Ok(response) if response.succeeded) {
            for &lease in leases {
                self.revoke_later(lease);
            }
        }
        response
    }

    /// A read-only transaction (no compares, only ranges), sent again on failure.
    pub(crate) async fn read_txn(
        &self,
        request: wire::TxnRequest,
    ) -> Result<wire::TxnResponse, EtcdError> {
        self.unary(KV_TXN, request, Retry::Idempotent).await
    }

    /// A new lease of `ttl` whole seconds (etcd raises it to its minimum TTL).
    pub(crate) async fn grant(&self, ttl: i64) -> Result<wire::LeaseGrantResponse, EtcdError> {
        let response: wire::LeaseGrantResponse = self
            .unary(
                LEASE_GRANT,
                wire::LeaseGrantRequest { ttl, id: 0 },
                Retry::Idempotent,
            )
            .await?;
        if !response.error.is_empty() {
            return Err(EtcdError::Lease(response.error));
        }
        Ok(response)
    }

    /// Ends a lease and deletes its keys. A lease that is already gone is not an error.
    pub(crate) async fn revoke(&self, id: i64) -> Result<(), EtcdError> {
        match self
            .unary::<_, wire::LeaseRevokeResponse>(
                LEASE_REVOKE,
                wire::LeaseRevokeRequest { id },
                Retry::Idempotent,
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(EtcdError::Status { message, .. }) if message.contains("lease not found") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// The ids of every live lease of the cluster (all applications', not only this prefix's).
    #[cfg(test)]
    pub(crate) async fn leases(&self) -> Result<Vec<i64>, EtcdError> {
        let response: wire::LeaseLeasesResponse = self
            .unary(LEASE_LEASES, wire::LeaseLeasesRequest {}, Retry::Idempotent)
            .await?;
        Ok(response.leases.iter().map(|lease| lease.id).collect())
    }

    /// Revokes in the background: for leases whose keys were never written or are already
    /// gone; if the revoke is lost, the lease expires by itself.
    pub(crate) fn revoke_later(&self, id: i64) {
        if id == 0 {
            return;
        }
        let client = self.clone();
        tokio::spawn(async move {
            if let Err(error) = client.revoke(id).await {
                tracing::debug!(lease = id, %error, "revoking an unused etcd lease failed; it expires by itself");
            }
        });
    }

    /// Deletes `key` after `delay` if it was last written at `revision`, revoking its lease:
    /// in the background, best effort (the key's lease ends it otherwise).
    pub(crate) fn delete_later(&self, key: Vec<u8>, revision: i64, delay: Duration) {
        let client = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let request = wire::TxnRequest {
                compare: vec![wire::modified_at(&key, revision)],
                success: vec![wire::get(&key), wire::delete(&key)],
                failure: Vec::new(),
            };
            match client.txn(request).await {
                Ok(response) => {
                    if let Some(kv) = response.range(0).first() {
                        client.revoke_later(kv.lease);
                    }
                }
                Err(error) => {
                    tracing::debug!(%error, "ending a minimum hold failed; its lease ends it");
                }
            }
        });
    }

    /// Renews a lease once; returns its TTL in seconds, 0 when the lease no longer exists.
    /// Sent again to the next endpoint when a member does not answer (a renewal is
    /// idempotent), all within the request timeout.
    pub(crate) async fn keep_alive_once(&self, id: i64) -> Result<i64, EtcdError> {
        self.with_failover(Retry::Idempotent, |token| async move {
            let request = tokio_stream::once(wire::LeaseKeepAliveRequest { id });
            let mut stream = self
                .streaming::<_, wire::LeaseKeepAliveResponse>(LEASE_KEEP_ALIVE, request, token)
                .await?;
            match stream.message().await {
                Ok(Some(response)) => Ok(response.ttl),
                Ok(None) => Err(EtcdError::Closed),
                Err(status) => Err(EtcdError::from_status(status)),
            }
        })
        .await
    }

    /// Opens a watch: the responses of `create` (the first says whether it was created),
    /// on the next endpoint when a member does not answer.
    pub(crate) async fn watch(
        &self,
        create: wire::WatchCreateRequest,
    ) -> Result<(tonic::Streaming<wire::WatchResponse>, WatchKeeper), EtcdError> {
        self.with_failover(Retry::Idempotent, |token| {
            let create = create.clone();
            async move {
                let (sender, receiver) = tokio::sync::mpsc::channel(1);
                let request = wire::WatchRequest {
                    request_union: Some(wire::WatchRequestUnion::Create(create)),
                };
                sender.send(request).await.map_err(|_| EtcdError::Closed)?;
                let requests = tokio_stream::wrappers::ReceiverStream::new(receiver);
                let stream = self.streaming(WATCH, requests, token).await?;
                Ok((stream, WatchKeeper { _sender: sender }))
            }
        })
        .await
    }

    async fn streaming<Req, Resp>(
        &self,
        path: &'static str,
        request: impl tokio_stream::Stream<Item = Req> + Send + 'static,
        token: Option<AsciiMetadataValue>,
    ) -> Result<tonic::Streaming<Resp>, EtcdError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let mut request = with_token(request, token);
        // A member cut off from the cluster's leader refuses the stream instead of keeping
        // it open without events.
        request
            .metadata_mut()
            .insert("hasleader", AsciiMetadataValue::from_static("true"));
        let mut grpc = self.ready_grpc().await?;
        let path = PathAndQuery::from_static(path);
        into_inner(grpc.streaming(request, path, ProstCodec::default()).await)
    }

    /// A gRPC client on the current endpoint's channel, ready to send.
    async fn ready_grpc(&self) -> Result<tonic::client::Grpc<Channel>, EtcdError> {
        let mut grpc = tonic::client::Grpc::new(self.channel());
        grpc.ready()
            .await
            .map_err(|e| EtcdError::Transport(e.to_string()))?;
        Ok(grpc)
    }

    fn channel(&self) -> Channel {
        let index = self.inner.current.load(Ordering::Relaxed) % self.inner.channels.len();
        self.inner.channels[index].clone()
    }

    fn next_endpoint(&self) {
        self.inner.current.fetch_add(1, Ordering::Relaxed);
    }

    /// One request, bounded by the request timeout as a whole; failed over to the next
    /// endpoint when it may be sent again; the token refreshed once when etcd says it expired.
    async fn unary<Req, Resp>(
        &self,
        path: &'static str,
        request: Req,
        retry: Retry,
    ) -> Result<Resp, EtcdError>
    where
        Req: prost::Message + Clone + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        self.with_failover(retry, |token| self.send(path, request.clone(), token))
            .await
    }

    /// Runs `attempt` (given the current token) until it succeeds, within the request timeout:
    /// on the next endpoint after a member did not answer, when `retry` allows; once more
    /// after refreshing an expired token.
    async fn with_failover<T, F, Fut>(&self, retry: Retry, mut attempt: F) -> Result<T, EtcdError>
    where
        F: FnMut(Option<AsciiMetadataValue>) -> Fut,
        Fut: std::future::Future<Output = Result<T, EtcdError>>,
    {
        let attempts = async {
            let (mut refreshed, mut tried) = (false, 0);
            loop {
                let token = self.inner.token.read().await.clone();
                match attempt(token.clone()).await {
                    Ok(value) => return Ok(value),
                    Err(error) if error.is_expired_token() && !refreshed => {
                        refreshed = true;
                        self.refresh_token(token).await?;
                    }
                    Err(error) if error.is_unavailable() => {
                        self.next_endpoint();
                        tried += 1;
                        let may_retry = match retry {
                            Retry::Idempotent => true,
                            Retry::IfNotSent => error.is_connect_failure(),
                        };
                        // Each endpoint twice: a channel whose connection failed answers its
                        // next call with that failure, and only then connects again, so after
                        // an outage the second round is the first on new connections.
                        if !may_retry || tried >= 2 * self.inner.channels.len() {
                            return Err(error);
                        }
                    }
                    Err(error) => return Err(error),
                }
            }
        };
        match tokio::time::timeout(self.inner.timeout, attempts).await {
            Ok(result) => result,
            Err(_) => {
                self.next_endpoint();
                Err(EtcdError::Timeout(self.inner.timeout))
            }
        }
    }

    async fn send<Req, Resp>(
        &self,
        path: &'static str,
        request: Req,
        token: Option<AsciiMetadataValue>,
    ) -> Result<Resp, EtcdError>
    where
        Req: prost::Message + Send + Sync + 'static,
        Resp: prost::Message + Default + Send + Sync + 'static,
    {
        let request = with_token(request, token);
        let mut grpc = self.ready_grpc().await?;
        let path = PathAndQuery::from_static(path);
        into_inner(grpc.unary(request, path, ProstCodec::default()).await)
    }

    /// Authenticates again, unless another task already replaced `stale`.
    async fn refresh_token(&self, stale: Option<AsciiMetadataValue>) -> Result<(), EtcdError> {
        let Some(credentials) = &self.inner.credentials else {
            return Ok(());
        };
        let _one_at_a_time = self.inner.refreshing.lock().await;
        if stale.is_some() && *self.inner.token.read().await != stale {
            return Ok(());
        }
        let mut tried = 0;
        let response: wire::AuthenticateResponse = loop {
            let request = wire::AuthenticateRequest {
                name: credentials.user.clone(),
                password: credentials.password.clone(),
            };
            let sent =
                tokio::time::timeout(self.inner.timeout, self.send(AUTHENTICATE, request, None))
                    .await
                    .unwrap_or(Err(EtcdError::Timeout(self.inner.timeout)));
            match sent {
                Ok(response) => break response,
                Err(error) if error.is_unavailable() || matches!(error, EtcdError::Timeout(_)) => {
                    self.next_endpoint();
                    tried += 1;
                    if tried >= self.inner.channels.len() {
                        return Err(error);
                    }
                }
                Err(EtcdError::Status { message, .. })
                    if message.contains("authentication is not enabled") =>
                {
                    // Credentials on a cluster without auth: requests go without a token.
                    *self.inner.token.write().await = None;
                    return Ok(());
                }
                Err(error) => {
                    return Err(EtcdError::AuthFailed {
                        user: credentials.user.clone(),
                        reason: error.to_string(),
                    });
                }
            }
        };
        let token = AsciiMetadataValue::try_from(response.token.as_str()).map_err(|_| {
            EtcdError::AuthFailed {
                user: credentials.user.clone(),
                reason: "etcd answered with a token that is not ASCII".to_owned(),
            }
        })?;
        *self.inner.token.write().await = Some(token);
        Ok(())
    }
}

/// `message` as a request carrying `token`, if any.
fn with_token<T>(message: T, token: Option<AsciiMetadataValue>) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    if let Some(token) = token {
        request.metadata_mut().insert("token", token);
    }
    request
}

/// The message (or message stream) of a gRPC response, or etcd's error.
fn into_inner<T>(response: Result<tonic::Response<T>, tonic::Status>) -> Result<T, EtcdError> {
    response
        .map(tonic::Response::into_inner)
        .map_err(EtcdError::from_status)
}

/// Keeps a watch's request stream open: etcd ends the watch when it closes.
#[derive(Debug)]
pub(crate) struct WatchKeeper {
    _sender: tokio::sync::mpsc::Sender<wire::WatchRequest>,
}
