//! Release hints: one watch on the held and minimum-hold keys, whose deletions (a release, an
//! expired lease, a key deleted by hand, a minimum hold run out) are forwarded by lock name to
//! in-process subscribers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, oneshot};

use crate::client::Client;
use crate::keys::Keys;
use crate::wire;

/// Room for hints not yet read by a slow subscriber; it then sees `Lagged` and retries at once.
const CAPACITY: usize = 64;

/// The watch task of one provider and its clones: started on the first subscription, stopped
/// when the last clone is dropped (the `stop` sender goes with it).
#[derive(Debug, Default)]
pub(crate) struct Hints {
    running: Mutex<Option<Running>>,
}

#[derive(Debug)]
struct Running {
    sender: broadcast::Sender<Arc<str>>,
    _stop: oneshot::Sender<()>,
}

impl Hints {
    /// A receiver of released lock names. `None` outside a tokio runtime, where no watch can
    /// run.
    pub(crate) fn subscribe(
        &self,
        client: &Client,
        keys: &Arc<Keys>,
    ) -> Option<broadcast::Receiver<Arc<str>>> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(running) = running.as_ref() {
            return Some(running.sender.subscribe());
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (sender, receiver) = broadcast::channel(CAPACITY);
        let (stop_sender, stop) = oneshot::channel();
        runtime.spawn(watch(
            client.clone(),
            Arc::clone(keys),
            sender.clone(),
            stop,
        ));
        *running = Some(Running {
            sender,
            _stop: stop_sender,
        });
        Some(receiver)
    }
}

/// Forwards deletions until the provider is gone, watching again after errors (deletions
/// meanwhile are lost, which subscribers tolerate by polling).
async fn watch(
    client: Client,
    keys: Arc<Keys>,
    sender: broadcast::Sender<Arc<str>>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let ended = tokio::select! {
            _ = &mut stop => return,
            ended = forward(&client, &keys, &sender) => ended,
        };
        tracing::debug!(
            prefix = keys.prefix(),
            ended,
            "release hint watch ended; watching again"
        );
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}

/// One watch over `<prefix>held/` to the end of `<prefix>least/` (the two sections are
/// adjacent in key order), deletions only. Returns why it ended.
async fn forward(client: &Client, keys: &Keys, sender: &broadcast::Sender<Arc<str>>) -> String {
    let create = wire::WatchCreateRequest {
        key: keys.section("held"),
        range_end: wire::prefix_end(&keys.section("least")),
        start_revision: 0,
        filters: vec![wire::FILTER_NOPUT],
    };
    let (mut stream, _keeper) = match client.watch(create).await {
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
                let _ = sender.send(Arc::from(name));
            }
        }
    }
}
