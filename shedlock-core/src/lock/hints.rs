//! Release hints, the store's side: the listener tasks of a provider (a `LISTEN`, a
//! subscription, a watch) and the in-process fan-out of what they hear to every subscriber of
//! [`LockProvider::release_hints`](crate::LockProvider::release_hints).

use std::future::Future;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{broadcast, oneshot};

/// Room for hints not yet read by a slow subscriber; it then sees `Lagged` and retries at once.
const CAPACITY: usize = 64;

/// The first pause before a listener that ended listens again; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(100);
const MAX_PAUSE: Duration = Duration::from_secs(5);

/// Where a store's release hints come from: one connection to the store that hears the names
/// of released locks (PostgreSQL's `LISTEN`, a Redis subscription, an etcd watch), run by a
/// [`ReleaseHintFanOut`] again and again while the provider lives.
pub trait ReleaseHintSource: Send + Sync + 'static {
    /// Connects, sends the name of every released lock it hears to `hints` until the
    /// connection ends, and says what then: [`ControlFlow::Continue`] to connect again after a
    /// pause (hints sent meanwhile are lost, which subscribers tolerate by polling),
    /// [`ControlFlow::Break`] to stop for good. Saying why it ended (a log line) is the
    /// source's part.
    fn forward(
        &self,
        hints: &broadcast::Sender<Arc<str>>,
    ) -> impl Future<Output = ControlFlow<()>> + Send;
}

/// The release hints of one provider and its clones (share it behind an `Arc`): the listener
/// tasks, one per [`ReleaseHintSource`], start on the first subscription and stop when this is
/// dropped; every subscriber hears the names all of them forward.
///
/// ```
/// use std::ops::ControlFlow;
/// use std::sync::Arc;
/// use shedlock_core::{ReleaseHintFanOut, ReleaseHintSource};
/// use tokio::sync::broadcast;
///
/// struct Announcer;
///
/// impl ReleaseHintSource for Announcer {
///     async fn forward(&self, hints: &broadcast::Sender<Arc<str>>) -> ControlFlow<()> {
///         let _ = hints.send(Arc::from("nightly_report"));
///         ControlFlow::Break(())
///     }
/// }
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let hints = ReleaseHintFanOut::default();
/// let mut released = hints.subscribe(std::iter::once(Announcer)).expect("in a runtime");
/// assert_eq!(&*released.recv().await.unwrap(), "nightly_report");
/// # }
/// ```
#[derive(Debug, Default)]
pub struct ReleaseHintFanOut {
    running: Mutex<Option<Running>>,
}

#[derive(Debug)]
struct Running {
    sender: broadcast::Sender<Arc<str>>,
    /// Dropping one stops its listener task.
    _stop: Vec<oneshot::Sender<()>>,
}

impl ReleaseHintFanOut {
    /// A receiver of released lock names. The first call (and the first after
    /// [`stop`](Self::stop)) starts one listener task per source; later calls do not iterate
    /// `sources` at all, so a lazy iterator builds them only when needed. `None` outside a
    /// tokio runtime, where no listener can run.
    pub fn subscribe<S: ReleaseHintSource>(
        &self,
        sources: impl IntoIterator<Item = S>,
    ) -> Option<broadcast::Receiver<Arc<str>>> {
        let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(running) = running.as_ref() {
            return Some(running.sender.subscribe());
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        let (sender, receiver) = broadcast::channel(CAPACITY);
        let stops = sources
            .into_iter()
            .map(|source| {
                let (stop_sender, stop) = oneshot::channel();
                runtime.spawn(listen(source, sender.clone(), stop));
                stop_sender
            })
            .collect();
        *running = Some(Running {
            sender,
            _stop: stops,
        });
        Some(receiver)
    }

    /// Stops the listener tasks; their subscribers see the channel close.
    pub fn stop(&self) {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
    }
}

/// Runs `source` until it breaks or the fan-out stops it, pausing longer after each end.
async fn listen<S: ReleaseHintSource>(
    source: S,
    sender: broadcast::Sender<Arc<str>>,
    mut stop: oneshot::Receiver<()>,
) {
    let mut pause = FIRST_PAUSE;
    loop {
        let flow = tokio::select! {
            _ = &mut stop => return,
            flow = source.forward(&sender) => flow,
        };
        if flow.is_break() {
            return;
        }
        tokio::select! {
            _ = &mut stop => return,
            () = tokio::time::sleep(pause) => {}
        }
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts its connections; sends `name` on each, then ends as `flow` says.
    struct Counting {
        connections: Arc<AtomicUsize>,
        name: &'static str,
        flow: ControlFlow<()>,
    }

    impl ReleaseHintSource for Counting {
        async fn forward(&self, hints: &broadcast::Sender<Arc<str>>) -> ControlFlow<()> {
            self.connections.fetch_add(1, Ordering::SeqCst);
            let _ = hints.send(Arc::from(self.name));
            self.flow
        }
    }

    fn counting(name: &'static str, flow: ControlFlow<()>) -> (Counting, Arc<AtomicUsize>) {
        let connections = Arc::new(AtomicUsize::new(0));
        let source = Counting {
            connections: Arc::clone(&connections),
            name,
            flow,
        };
        (source, connections)
    }

    #[test]
    fn no_hints_outside_a_runtime() {
        let hints = ReleaseHintFanOut::default();
        assert!(hints.subscribe(std::iter::empty::<Counting>()).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn the_first_subscription_starts_every_source_and_later_ones_share_them() {
        let hints = ReleaseHintFanOut::default();
        let (a, a_connections) = counting("a", ControlFlow::Break(()));
        let (b, b_connections) = counting("b", ControlFlow::Break(()));
        let mut first = hints.subscribe([a, b]).unwrap();
        let mut second = hints
            .subscribe(std::iter::from_fn(|| -> Option<Counting> {
                panic!("sources are built for the first subscription only")
            }))
            .unwrap();
        let mut heard = [first.recv().await.unwrap(), first.recv().await.unwrap()];
        heard.sort();
        assert_eq!(heard, [Arc::from("a"), Arc::from("b")]);
        tokio::time::sleep(Duration::from_secs(60)).await;
        // A source that breaks is not connected again.
        assert_eq!(a_connections.load(Ordering::SeqCst), 1);
        assert_eq!(b_connections.load(Ordering::SeqCst), 1);
        // Subscribed before anything was sent: hears it too.
        assert!(second.try_recv().is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_source_that_continues_connects_again_after_growing_pauses() {
        let hints = ReleaseHintFanOut::default();
        let (source, connections) = counting("a", ControlFlow::Continue(()));
        let _receiver = hints.subscribe([source]).unwrap();
        // Connections at 0, 0.1, 0.3, 0.7, 1.5 s.
        tokio::time::sleep(Duration::from_millis(1000)).await;
        assert_eq!(connections.load(Ordering::SeqCst), 4);
        tokio::time::sleep(Duration::from_millis(600)).await;
        assert_eq!(connections.load(Ordering::SeqCst), 5);
    }

    #[tokio::test(start_paused = true)]
    async fn stop_ends_the_listeners_and_the_next_subscription_starts_them_again() {
        let hints = ReleaseHintFanOut::default();
        let (source, connections) = counting("a", ControlFlow::Continue(()));
        let mut receiver = hints.subscribe([source]).unwrap();
        assert_eq!(&*receiver.recv().await.unwrap(), "a");
        hints.stop();
        // Drained, then closed: the channel's last sender went with the listener task.
        while let Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) = receiver.recv().await {}
        let stopped_at = connections.load(Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(connections.load(Ordering::SeqCst), stopped_at);
        let (source, connections) = counting("b", ControlFlow::Break(()));
        let mut receiver = hints.subscribe([source]).unwrap();
        assert_eq!(&*receiver.recv().await.unwrap(), "b");
        assert_eq!(connections.load(Ordering::SeqCst), 1);
    }
}
