//! Release hints: `SUBSCRIBE` to the release channel on each server, forwarded to in-process
//! subscribers.

use std::ops::ControlFlow;
use std::sync::Arc;

use futures_util::StreamExt as _;
use shedlock_core::{ReleaseHintFanOut, ReleaseHintSource};
use tokio::sync::broadcast;

use crate::node::Node;

/// The listener tasks of one provider and its clones (one per server): started on the first
/// subscription, stopped when the last clone is dropped.
#[derive(Debug, Default)]
pub(crate) struct ReleaseHints {
    fan_out: ReleaseHintFanOut,
}

impl ReleaseHints {
    /// A receiver of released lock names, from any of `nodes`. `None` outside a tokio runtime,
    /// where no listener can run.
    pub(crate) fn subscribe(
        &self,
        nodes: &[Node],
        channel: &Arc<str>,
    ) -> Option<broadcast::Receiver<Arc<str>>> {
        self.fan_out
            .subscribe(nodes.iter().map(|node| Subscription {
                node: node.clone(),
                channel: Arc::clone(channel),
            }))
    }
}

/// The release channel on one server, subscribed again after errors.
struct Subscription {
    node: Node,
    channel: Arc<str>,
}

impl ReleaseHintSource for Subscription {
    async fn forward(&self, hints: &broadcast::Sender<Arc<str>>) -> ControlFlow<()> {
        let error = self.listen(hints).await;
        tracing::debug!(
            server = self.node.server(),
            channel = &*self.channel,
            error,
            "release hint subscription ended; resubscribing"
        );
        ControlFlow::Continue(())
    }
}

impl Subscription {
    /// Subscribes and forwards; returns only with what ended it.
    async fn listen(&self, hints: &broadcast::Sender<Arc<str>>) -> String {
        let Some(client) = self.node.client() else {
            return "no server to subscribe on".to_owned();
        };
        let mut pubsub = match client.get_async_pubsub().await {
            Ok(pubsub) => pubsub,
            Err(error) => return error.to_string(),
        };
        if let Err(error) = pubsub.subscribe(&*self.channel).await {
            return error.to_string();
        }
        let mut messages = pubsub.into_on_message();
        while let Some(message) = messages.next().await {
            if let Ok(name) = message.get_payload::<String>() {
                // Nobody subscribed right now is fine: hints are best effort.
                drop(hints.send(Arc::from(name)));
            }
        }
        "connection closed".to_owned()
    }
}
