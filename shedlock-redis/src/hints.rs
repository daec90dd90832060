//! Release hints: `SUBSCRIBE` to the release channel on each server, forwarded to in-process
//! subscribers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::StreamExt as _;
use tokio::sync::{broadcast, oneshot};

use crate::node::Node;

/// Room for hints not yet read by a slow subscriber; it then sees `Lagged` and retries at once.
const CAPACITY: usize = 64;

/// The listener tasks of one provider and its clones (one per server): started on the first
/// subscription, stopped when the last clone is dropped (the `stop` senders go with it).
#[derive(Debug, Default)]
pub(crate) struct ReleaseHints {
    running: Mutex<Option<Running>>,
}

#[derive(Debug)]
struct Running {
    sender: broadcast::Sender<Arc<str>>,
    _stop: Vec<oneshot::Sender<()>>,
}

impl ReleaseHints {
    /// A receiver of released lock names, from any of `nodes`. `None` outside a tokio runtime,
    /// where no listener can run.
    pub(crate) fn subscribe(
        &self,
        nodes: &[Node],
        channel: &Arc<str>,
    ) -> Option<broadcast::Receiver<Arc<str>>> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(running) = running.as_ref() {
            return Some(running.sender.subscribe());
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (sender, receiver) = broadcast::channel(CAPACITY);
        let mut stops = Vec::with_capacity(nodes.len());
        for node in nodes {
            let (stop_sender, stop) = oneshot::channel();
            runtime.spawn(listen(
                node.clone(),
                Arc::clone(channel),
                sender.clone(),
                stop,
            ));
            stops.push(stop_sender);
        }
        *running = Some(Running {
            sender,
            _stop: stops,
        });
        Some(receiver)
    }
}

/// Forwards messages until the provider is gone, resubscribing after errors (hints published
/// meanwhile are lost, which subscribers tolerate by polling).
async fn listen(
    node: Node,
    channel: Arc<str>,
    sender: broadcast::Sender<Arc<str>>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let error = tokio::select! {
            _ = &mut stop => return,
            error = forward(&node, &channel, &sender) => error,
        };
        tracing::debug!(
            server = node.server(),
            channel = &*channel,
            error,
            "release hint subscription ended; resubscribing"
        );
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// Subscribes and forwards; returns only with what ended it.
async fn forward(node: &Node, channel: &str, sender: &broadcast::Sender<Arc<str>>) -> String {
    let mut pubsub = match node.client().get_async_pubsub().await {
        Ok(pubsub) => pubsub,
        Err(error) => return error.to_string(),
    };
    if let Err(error) = pubsub.subscribe(channel).await {
        return error.to_string();
    }
    let mut messages = pubsub.into_on_message();
    while let Some(message) = messages.next().await {
        if let Ok(name) = message.get_payload::<String>() {
            // Nobody subscribed right now is fine: hints are best effort.
            drop(sender.send(Arc::from(name)));
        }
    }
    "connection closed".to_owned()
}
