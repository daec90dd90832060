//! Release hints: one watch on the held and minimum-hold keys, whose deletions (a release, an
//! expired lease, a key deleted by hand, a minimum hold run out) are forwarded by lock name to
//! in-process subscribers.

use std::ops::ControlFlow;
use std::sync::Arc;

use shedlock_core::{ReleaseHintFanOut, ReleaseHintSource};
use tokio::sync::broadcast;

use crate::client::Client;
use crate::names::Keys;
use crate::wire;

/// The watch task of one provider and its clones: started on the first subscription, stopped
/// when the last clone is dropped.
#[derive(Debug, Default)]
pub(crate) struct Hints {
    fan_out: ReleaseHintFanOut,
}

impl Hints {
    /// A receiver of released lock names. `None` outside a tokio runtime, where no watch can
    /// run.
    pub(crate) fn subscribe(
        &self,
        client: &Client,
        keys: &Arc<Keys>,
    ) -> Option<broadcast::Receiver<Arc<str>>> {
        self.fan_out.subscribe(std::iter::once_with(|| Watch {
            client: client.clone(),
            keys: Arc::clone(keys),
        }))
    }
}

/// Deletions under the held and minimum-hold sections, watched again after errors.
struct Watch {
    client: Client,
    keys: Arc<Keys>,
}

impl ReleaseHintSource for Watch {
    async fn forward(&self, hints: &broadcast::Sender<Arc<str>>) -> ControlFlow<()> {
        let ended = self.watch(hints).await;
        tracing::debug!(
            prefix = self.keys.prefix(),
            ended,
            "release hint watch ended; watching again"
        );
        ControlFlow::Continue(())
    }
}

impl Watch {
    /// One watch over `<prefix>held/` to the end of `<prefix>least/` (the two sections are
    /// adjacent in key order), deletions only. Returns why it ended.
    async fn watch(&self, hints: &broadcast::Sender<Arc<str>>) -> String {
        let keys = &self.keys;
        let create = wire::WatchCreateRequest {
            key: keys.section("held"),
            range_end: wire::prefix_end(&keys.section("least")),
            start_revision: 0,
            filters: vec![wire::FILTER_NOPUT],
        };
        let (mut stream, _keeper) = match self.client.watch(create).await {
            Ok(opened) => opened,
            Err(error) => return error.to_string(),
        };
        loop {
            let response = match stream.message().await {
                Ok(Some(response)) => response,
                Ok(None) => return "stream closed".to_owned(),
                Err(status) => return status.message().to_owned(),
            };
            if response.canceled {
                return format!("watch canceled: {}", response.cancel_reason);
            }
            for event in response.events {
                let Some(kv) = event.kv.filter(|_| event.kind == wire::EVENT_DELETE) else {
                    continue;
                };
                let name = keys
                    .name_in("held", &kv.key)
                    .or_else(|| keys.name_in("least", &kv.key));
                if let Some(name) = name {
                    // No receiver left is fine: nobody waits.
                    let _ = hints.send(Arc::from(name));
                }
            }
        }
    }
}
