//! Group commit for the statements a run costs besides its claim: releases, and the starts and
//! ends of run records. When a thousand jobs of one tick start and end together, each would
//! send a statement of its own three times over; instead, a call made while an earlier batch
//! of its kind is in flight waits for that batch and goes out with every call that came
//! meanwhile, in one statement. A call made while none is in flight goes out at once, alone.
//! No timers: nothing waits that would not have waited for the database anyway.
//!
//! The batches are sent by a task of their own, so a caller that goes away (its future
//! dropped) abandons nobody else. Two calls of one key (the same lease, the same run) never go
//! in one batch: a statement may write a row once, and the second must see the first's write.

use std::collections::HashSet;
use std::hash::Hash;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::oneshot;

/// What a batch's statement is keyed by: calls of one key go in separate batches, in order.
pub(crate) trait Keyed {
    type Key: Eq + Hash;
    fn key(&self) -> Self::Key;
}

/// The calls of one kind waiting for the next batch, shared by a provider's clones.
pub(crate) struct Combiner<T, R> {
    inner: Mutex<Pending<T, R>>,
}

struct Pending<T, R> {
    waiting: Vec<(T, oneshot::Sender<R>)>,
    /// A task is sending batches and will take what waits.
    sending: bool,
}

impl<T, R> Default for Combiner<T, R> {
    fn default() -> Self {
        Combiner {
            inner: Mutex::new(Pending {
                waiting: Vec::new(),
                sending: false,
            }),
        }
    }
}

impl<T, R> std::fmt::Debug for Combiner<T, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Combiner")
            .field("waiting", &self.lock().waiting.len())
            .finish()
    }
}

impl<T, R> Combiner<T, R> {
    fn lock(&self) -> MutexGuard<'_, Pending<T, R>> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<T: Keyed + Send + 'static, R: Send + 'static> Combiner<T, R> {
    /// Sends `item` with the next batch and returns its answer. `send` sends one batch (at
    /// most `max` items, distinct keys) as one statement and answers each item in order, or
    /// `None` when the statement failed as a whole; the caller then gets `None` too and goes
    /// alone, for an answer (and an error) of its own. `None` also when the sending task went
    /// away (the runtime shutting down).
    pub(crate) async fn submit<S, F>(self: &Arc<Self>, item: T, max: usize, send: S) -> Option<R>
    where
        S: FnMut(Vec<T>) -> F + Send + 'static,
        F: Future<Output = Option<Vec<R>>> + Send + 'static,
    {
        let (answer, receiver) = oneshot::channel();
        let start = {
            let mut pending = self.lock();
            pending.waiting.push((item, answer));
            !std::mem::replace(&mut pending.sending, true)
        };
        if start {
            tokio::spawn(Arc::clone(self).send_all(max.max(1), send));
        }
        receiver.await.ok()
    }

    /// Sends batches until nothing waits.
    async fn send_all<S, F>(self: Arc<Self>, max: usize, mut send: S)
    where
        S: FnMut(Vec<T>) -> F,
        F: Future<Output = Option<Vec<R>>>,
    {
        let mut sender = Sender {
            combiner: &self,
            done: false,
        };
        loop {
            let Some(batch) = sender.take(max) else {
                return;
            };
            let (items, answers): (Vec<T>, Vec<oneshot::Sender<R>>) = batch.into_iter().unzip();
            // A failed batch drops the answers: each caller goes alone.
            if let Some(outcomes) = send(items).await {
                for (answer, outcome) in answers.into_iter().zip(outcomes) {
                    let _ = answer.send(outcome);
                }
            }
        }
    }
}

/// The sending task's hold on its combiner: when the task ends early (dropped or panicked),
/// everything waiting is told to go alone and the next call starts a new task.
struct Sender<'a, T, R> {
    combiner: &'a Combiner<T, R>,
    done: bool,
}

impl<T: Keyed, R> Sender<'_, T, R> {
    /// The next batch: up to `max` waiting calls of distinct keys whose callers still wait, in
    /// the order they came. `None`, and the task's end, when nothing waits: decided under the
    /// same lock as a new call's "is a task sending?", so no call is left behind.
    fn take(&mut self, max: usize) -> Option<Vec<(T, oneshot::Sender<R>)>> {
        let mut pending = self.combiner.lock();
        pending.waiting.retain(|(_, answer)| !answer.is_closed());
        if pending.waiting.is_empty() {
            pending.sending = false;
            self.done = true;
            return None;
        }
        let mut keys = HashSet::new();
        let mut batch = Vec::new();
        let mut left = Vec::new();
        for (item, answer) in pending.waiting.drain(..) {
            if batch.len() < max && keys.insert(item.key()) {
                batch.push((item, answer));
            } else {
                left.push((item, answer));
            }
        }
        pending.waiting = left;
        Some(batch)
    }
}

impl<T, R> Drop for Sender<'_, T, R> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let waiting = {
            let mut pending = self.combiner.lock();
            pending.sending = false;
            std::mem::take(&mut pending.waiting)
        };
        // Dropped answers: their callers go alone.
        drop(waiting);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    #[derive(Debug)]
    struct Item(u32);

    impl Keyed for Item {
        type Key = u32;
        fn key(&self) -> u32 {
            self.0
        }
    }

    /// A hundred calls made together: the first goes alone, the rest in the next batch (the
    /// repeated key in the one after), each answered with its own item.
    #[tokio::test]
    async fn calls_made_meanwhile_share_the_next_batch() {
        let combiner: Arc<Combiner<Item, u32>> = Arc::default();
        let batches = Arc::new(Mutex::new(Vec::new()));
        let (open, gate) = tokio::sync::watch::channel(false);
        let send = {
            let batches = Arc::clone(&batches);
            move |items: Vec<Item>| {
                let batches = Arc::clone(&batches);
                let mut gate = gate.clone();
                async move {
                    batches.lock().unwrap().push(items.len());
                    gate.wait_for(|open| *open).await.unwrap();
                    Some(items.iter().map(|item| item.0 * 10).collect())
                }
            }
        };
        let mut calls = Vec::new();
        for i in (0..100).chain([7]) {
            let (combiner, send) = (Arc::clone(&combiner), send.clone());
            calls.push(tokio::spawn(async move {
                combiner.submit(Item(i), 1000, send).await
            }));
            tokio::task::yield_now().await;
        }
        open.send(true).unwrap();
        for (call, i) in calls.into_iter().zip((0..100).chain([7])) {
            assert_eq!(call.await.unwrap(), Some(i * 10));
        }
        assert_eq!(*batches.lock().unwrap(), [1, 99, 1]);
    }

    /// A failed batch answers nobody: each caller goes alone; the next call starts anew.
    #[tokio::test]
    async fn a_failed_batch_sends_its_callers_alone() {
        let combiner: Arc<Combiner<Item, u32>> = Arc::default();
        let sent = Arc::new(AtomicUsize::new(0));
        let failing = {
            let sent = Arc::clone(&sent);
            move |_: Vec<Item>| {
                sent.fetch_add(1, Ordering::Relaxed);
                async { None::<Vec<u32>> }
            }
        };
        assert_eq!(combiner.submit(Item(1), 10, failing.clone()).await, None);
        let working = |items: Vec<Item>| async move { Some(items.iter().map(|i| i.0).collect()) };
        assert_eq!(combiner.submit(Item(2), 10, working).await, Some(2));
        assert_eq!(sent.load(Ordering::Relaxed), 1);
    }
}
