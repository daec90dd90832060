//! Release hints: `LISTEN` on the release channel, forwarded to in-process subscribers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::{broadcast, oneshot};

/// Room for hints not yet read by a slow subscriber; it then sees `Lagged` and retries at once.
const CAPACITY: usize = 64;

/// The listener task of one provider and its clones: started on the first subscription,
/// stopped when the last clone is dropped (the `stop` sender goes with it).
#[derive(Debug, Default)]
pub(crate) struct ReleaseHints {
    running: Mutex<Option<Running>>,
    /// Set once the listener started: read on every release, so kept outside the mutex.
    started: AtomicBool,
    /// Set when the database refused `LISTEN` or `pg_notify` (CockroachDB): no hints, no
    /// notifications from then on.
    unsupported: Arc<AtomicBool>,
}

#[derive(Debug)]
struct Running {
    sender: broadcast::Sender<Arc<str>>,
    _stop: oneshot::Sender<()>,
}

impl ReleaseHints {
    /// Whether a listener was started for this provider and its clones, and the database
    /// supports notifications.
    pub(crate) fn started(&self) -> bool {
        self.started.load(Ordering::Relaxed) && !self.unsupported()
    }

    /// Whether the database refused `LISTEN` or `pg_notify`.
    pub(crate) fn unsupported(&self) -> bool {
        self.unsupported.load(Ordering::Relaxed)
    }

    /// Switches hints and notifications off for good: the database does not support them.
    pub(crate) fn set_unsupported(&self, error: &sqlx::Error) {
        if !self.unsupported.swap(true, Ordering::Relaxed) {
            tracing::info!(%error, "the database does not support LISTEN/NOTIFY: release hints are off, followers rely on polling");
        }
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }

    /// A receiver of released lock names. `None` outside a tokio runtime, where no listener
    /// can run.
    pub(crate) fn subscribe(
        &self,
        pool: &PgPool,
        channel: &Arc<str>,
    ) -> Option<broadcast::Receiver<Arc<str>>> {
        if self.unsupported() {
            return None;
        }
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(running) = running.as_ref() {
            return Some(running.sender.subscribe());
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (sender, receiver) = broadcast::channel(CAPACITY);
        let (stop_sender, stop) = oneshot::channel();
        runtime.spawn(listen(
            pool.clone(),
            Arc::clone(channel),
            sender.clone(),
            stop,
            Arc::clone(&self.unsupported),
        ));
        *running = Some(Running {
            sender,
            _stop: stop_sender,
        });
        self.started.store(true, Ordering::Relaxed);
        Some(receiver)
    }
}

/// Forwards notifications until the provider is gone, the pool is closed or the database
/// turns out not to support `LISTEN`, reconnecting after errors (hints sent meanwhile are lost,
/// which subscribers tolerate by polling). Subscribers see the channel close when it ends.
async fn listen(
    pool: PgPool,
    channel: Arc<str>,
    sender: broadcast::Sender<Arc<str>>,
    mut stop: oneshot::Receiver<()>,
    unsupported: Arc<AtomicBool>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let error = tokio::select! {
            _ = &mut stop => return,
            error = forward(&pool, &channel, &sender) => error,
        };
        if matches!(error, sqlx::Error::PoolClosed) {
            return;
        }
        if is_unsupported(&error) {
            tracing::info!(channel = &*channel, %error, "the database does not support LISTEN: release hints are off, followers rely on polling");
            unsupported.store(true, Ordering::Relaxed);
            return;
        }
        tracing::debug!(channel = &*channel, %error, "release hint listener failed; reconnecting");
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Listens and forwards; returns only with the error that ended it.
async fn forward(
    pool: &PgPool,
    channel: &str,
    sender: &broadcast::Sender<Arc<str>>,
) -> sqlx::Error {
    let mut listener = match PgListener::connect_with(pool).await {
        Ok(listener) => listener,
        Err(error) => return error,
    };
    if let Err(error) = listener.listen(channel).await {
        return error;
    }
    loop {
        match listener.recv().await {
            // Nobody subscribed right now is fine: hints are best effort.
            Ok(notification) => drop(sender.send(Arc::from(notification.payload()))),
            Err(error) => return error,
        }
    }
}

/// SQLSTATE `0A000` (feature not supported: CockroachDB's answer to `LISTEN`) or `42883`
/// (undefined function: a database without `pg_notify`).
pub(crate) fn is_unsupported(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| matches!(&*code, "0A000" | "42883"))
}
