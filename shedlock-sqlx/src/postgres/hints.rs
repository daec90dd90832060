//! Release hints: `LISTEN` on the release channel, forwarded to in-process subscribers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::{broadcast, oneshot};

/// When a release sends `NOTIFY`, and on which channel (the builder's PostgreSQL settings).
#[derive(Debug, Clone, Default)]
pub(crate) struct ReleaseNotify {
    /// `None`: `<table>_released`.
    pub(crate) channel: Option<String>,
    pub(crate) policy: NotifyPolicy,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum NotifyPolicy {
    /// Once this provider (or a clone) listens for hints, i.e. takes part in an election.
    #[default]
    WhileListening,
    Always,
    Never,
}

/// Room for hints not yet read by a slow subscriber; it then sees `Lagged` and retries at once.
const CAPACITY: usize = 64;

/// The listener task of one provider and its clones: started on the first subscription,
/// stopped when the last clone is dropped (the `stop` sender goes with it).
#[derive(Debug, Default)]
pub(crate) struct ReleaseHints {
    running: Mutex<Option<Running>>,
    /// Set once the listener started: read on every release, so kept outside the mutex.
    started: AtomicBool,
}

#[derive(Debug)]
struct Running {
    sender: broadcast::Sender<Arc<str>>,
    _stop: oneshot::Sender<()>,
}

impl ReleaseHints {
    /// Whether a listener was started for this provider and its clones.
    pub(crate) fn started(&self) -> bool {
        self.started.load(Ordering::Relaxed)
    }

    /// A receiver of released lock names. `None` outside a tokio runtime, where no listener
    /// can run.
    pub(crate) fn subscribe(
        &self,
        pool: &PgPool,
        channel: &Arc<str>,
    ) -> Option<broadcast::Receiver<Arc<str>>> {
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
        ));
        *running = Some(Running {
            sender,
            _stop: stop_sender,
        });
        self.started.store(true, Ordering::Relaxed);
        Some(receiver)
    }
}

/// Forwards notifications until the provider is gone or the pool is closed, reconnecting
/// after errors (hints sent meanwhile are lost, which subscribers tolerate by polling).
async fn listen(
    pool: PgPool,
    channel: Arc<str>,
    sender: broadcast::Sender<Arc<str>>,
    mut stop: oneshot::Receiver<()>,
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
