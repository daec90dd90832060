//! One ZooKeeper session for a provider and its clones, opened again when it ends or loses its
//! server.
//!
//! Lock nodes are persistent, so a provider does not care which session writes them: when a
//! session expires (a long pause, a partition) or is disconnected, the next operation simply
//! opens a new one.
//! Every request is bounded by the request timeout: a ZooKeeper client queues requests while
//! it looks for a server, and an operation must answer "failed" rather than wait for a quorum.

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use zookeeper_client::{Client, SessionState};

use crate::access::Access;
use crate::error::ZkError;

/// A connect string, credentials, timeouts, and the current session.
#[derive(Debug)]
pub(crate) struct Session {
    connect_string: String,
    access: Access,
    session_timeout: Duration,
    request_timeout: Duration,
    current: Mutex<Option<Arc<Client>>>,
    reconnecting: tokio::sync::Mutex<()>,
}

impl Session {
    /// Opens the first session.
    pub(crate) async fn open(
        connect_string: &str,
        access: Access,
        session_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<Self, ZkError> {
        let client = connect(connect_string, &access, session_timeout, request_timeout).await?;
        Ok(Session {
            connect_string: connect_string.to_owned(),
            access,
            session_timeout,
            request_timeout,
            current: Mutex::new(Some(Arc::new(client))),
            reconnecting: tokio::sync::Mutex::new(()),
        })
    }

    pub(crate) fn connect_string(&self) -> &str {
        &self.connect_string
    }

    pub(crate) fn access(&self) -> &Access {
        &self.access
    }

    /// The live session's client, or a new session's if it ended.
    pub(crate) async fn client(&self) -> Result<Arc<Client>, ZkError> {
        if let Some(client) = self.live() {
            return Ok(client);
        }
        let _one_at_a_time = self.reconnecting.lock().await;
        if let Some(client) = self.live() {
            return Ok(client);
        }
        let client = Arc::new(
            connect(
                &self.connect_string,
                &self.access,
                self.session_timeout,
                self.request_timeout,
            )
            .await?,
        );
        tracing::info!(session = %client.session_id(), "opened a new ZooKeeper session");
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&client));
        Ok(client)
    }

    /// The current client while its session is connected. A client that lost its server is
    /// not waited for: it reconnects on its own after a pause that doubles with every round
    /// it failed (100 ms × the servers, up to 1 s, × 2 per round), so after a few seconds'
    /// outage the ensemble was back seconds before it looked again. The next operation opens a
    /// new session instead, at once (lock nodes are persistent: no session owns them), and an
    /// operation during the outage fails as soon as the servers refuse it.
    fn live(&self) -> Option<Arc<Client>> {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        current
            .as_ref()
            .filter(|c| c.state() == SessionState::SyncConnected)
            .cloned()
    }

    /// `request`, failing with [`ZkError::Timeout`] when the ensemble does not answer in time.
    pub(crate) async fn timed<T>(
        &self,
        request: impl Future<Output = Result<T, zookeeper_client::Error>>,
    ) -> Result<T, ZkError> {
        timed(self.request_timeout, request).await
    }

    /// `request`'s own answer, or [`ZkError::Timeout`] (for answers that are not plain
    /// client results, like a transaction's).
    pub(crate) async fn bounded<T>(&self, request: impl Future<Output = T>) -> Result<T, ZkError> {
        tokio::time::timeout(self.request_timeout, request)
            .await
            .map_err(|_| ZkError::Timeout(self.request_timeout))
    }
}

/// Opens a session with `access`'s credentials, failing within `timeout` (and at once when
/// every server refuses).
pub(crate) async fn connect(
    connect_string: &str,
    access: &Access,
    session_timeout: Duration,
    timeout: Duration,
) -> Result<Client, ZkError> {
    let connecting = access
        .connector()
        .with_session_timeout(session_timeout)
        .with_fail_eagerly()
        .connect(connect_string);
    match tokio::time::timeout(timeout, connecting).await {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(source)) => Err(ZkError::Connect {
            connect_string: connect_string.to_owned(),
            source,
        }),
        Err(_) => Err(ZkError::Connect {
            connect_string: connect_string.to_owned(),
            source: zookeeper_client::Error::Timeout,
        }),
    }
}

/// `request` bounded by `timeout`.
pub(crate) async fn timed<T>(
    timeout: Duration,
    request: impl Future<Output = Result<T, zookeeper_client::Error>>,
) -> Result<T, ZkError> {
    match tokio::time::timeout(timeout, request).await {
        Ok(result) => result.map_err(ZkError::from),
        Err(_) => Err(ZkError::Timeout(timeout)),
    }
}
