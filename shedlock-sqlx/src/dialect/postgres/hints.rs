//! Release hints: `LISTEN` on the release channel, forwarded to in-process subscribers.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use shedlock_core::{ReleaseHintFanOut, ReleaseHintSource};
use sqlx::PgPool;
use sqlx::postgres::PgListener;
use tokio::sync::broadcast;

/// The listener task of one provider and its clones: started on the first subscription,
/// stopped when the last clone is dropped.
#[derive(Debug, Default)]
pub(crate) struct ReleaseHints {
    fan_out: ReleaseHintFanOut,
    /// Set once the listener started: read on every release, so kept outside the fan-out's
    /// mutex.
    started: AtomicBool,
    /// Set when the database refused `LISTEN` or `pg_notify` (CockroachDB): no hints, no
    /// notifications from then on.
    unsupported: Arc<AtomicBool>,
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
        self.fan_out.stop();
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
        let receiver = self.fan_out.subscribe(std::iter::once_with(|| Listener {
            pool: pool.clone(),
            channel: Arc::clone(channel),
            unsupported: Arc::clone(&self.unsupported),
        }))?;
        self.started.store(true, Ordering::Relaxed);
        Some(receiver)
    }
}

/// `LISTEN` on the release channel, connected again after errors, until the pool is closed or
/// the database turns out not to support it.
struct Listener {
    pool: PgPool,
    channel: Arc<str>,
    unsupported: Arc<AtomicBool>,
}

impl ReleaseHintSource for Listener {
    async fn forward(&self, hints: &broadcast::Sender<Arc<str>>) -> ControlFlow<()> {
        let error = self.listen(hints).await;
        if matches!(error, sqlx::Error::PoolClosed) {
            return ControlFlow::Break(());
        }
        let channel = &*self.channel;
        if is_unsupported(&error) {
            tracing::info!(channel, %error, "the database does not support LISTEN: release hints are off, followers rely on polling");
            self.unsupported.store(true, Ordering::Relaxed);
            return ControlFlow::Break(());
        }
        tracing::debug!(channel, %error, "release hint listener failed; reconnecting");
        ControlFlow::Continue(())
    }
}

impl Listener {
    /// Listens and forwards; returns only with the error that ended it.
    async fn listen(&self, hints: &broadcast::Sender<Arc<str>>) -> sqlx::Error {
        let mut listener = match PgListener::connect_with(&self.pool).await {
            Ok(listener) => listener,
            Err(error) => return error,
        };
        if let Err(error) = listener.listen(&self.channel).await {
            return error;
        }
        loop {
            match listener.recv().await {
                // Nobody subscribed right now is fine: hints are best effort.
                Ok(notification) => drop(hints.send(Arc::from(notification.payload()))),
                Err(error) => return error,
            }
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
