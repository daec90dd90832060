//! Acquisitions sent together when every connection is busy (group commit, no timers).
//!
//! While a connection is free, an acquire goes alone, as one statement. When all the
//! provider's connections are busy, acquires wait in a queue instead of for a connection each;
//! the next connection to become free takes every queued acquire (up to the dialect's
//! [`MAX_ACQUIRE_BATCH`](super::Dialect::MAX_ACQUIRE_BATCH), one per lock name) and sends them
//! as one statement with the same per-row conditions. A fleet firing many jobs at the same
//! tick then costs the database a few statements per instance instead of one per job.
//!
//! The batch runs in a task of its own, so a waiter that goes away (its future dropped) does
//! not abandon the others; a lease won for it is released.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use shedlock_core::{Error, LockConfiguration, LockLease, LockProvider};
use tokio::sync::oneshot;

use super::SqlLockProvider;
use super::retry::run;
use crate::Dialect;

/// What a queued acquire learns from its batch.
pub(crate) enum Answer {
    /// The batch's outcome for this lock.
    Done(Result<Option<LockLease>, Error>),
    /// The batch failed as a whole: run this acquire alone, for an outcome and an error of its
    /// own.
    Alone,
}

struct Waiter {
    config: LockConfiguration,
    answer: oneshot::Sender<Answer>,
}

/// The acquires waiting for a connection, shared by a provider's clones.
#[derive(Default)]
pub(crate) struct AcquireQueue {
    inner: Mutex<Queued>,
}

#[derive(Default)]
struct Queued {
    waiting: VecDeque<Waiter>,
    /// A batch task is waiting for a connection, and will take what is queued.
    collector: bool,
}

impl std::fmt::Debug for AcquireQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AcquireQueue")
            .field("waiting", &self.lock().waiting.len())
            .finish()
    }
}

impl AcquireQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queued> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues an acquire; `true` when no batch task is waiting for a connection yet, so the
    /// caller must start one.
    fn push(&self, waiter: Waiter) -> bool {
        let mut queued = self.lock();
        queued.waiting.push_back(waiter);
        !std::mem::replace(&mut queued.collector, true)
    }

    /// Takes up to `max` queued acquires of distinct names (a statement may write a row only
    /// once; a repeated name waits for the next batch) and drops those whose caller went away.
    /// The flag says whether acquires are left, for which the caller must start another batch
    /// task.
    fn take(&self, max: usize) -> (Vec<Waiter>, bool) {
        let mut queued = self.lock();
        let mut names = HashSet::new();
        let mut batch = Vec::new();
        let mut left = VecDeque::new();
        for waiter in queued.waiting.drain(..) {
            if waiter.answer.is_closed() {
                continue;
            }
            if batch.len() < max && names.insert(Arc::<str>::from(waiter.config.name())) {
                batch.push(waiter);
            } else {
                left.push_back(waiter);
            }
        }
        queued.waiting = left;
        queued.collector = !queued.waiting.is_empty();
        (batch, queued.collector)
    }
}

/// Tells everything queued to run alone if the batch task ends before it took the queue (no
/// connection to be had, or the task dropped): nobody would collect it otherwise.
struct Collector<'a> {
    queue: &'a AcquireQueue,
    done: bool,
}

impl Drop for Collector<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let waiting = {
            let mut queued = self.queue.lock();
            queued.collector = false;
            std::mem::take(&mut queued.waiting)
        };
        for waiter in waiting {
            let _ = waiter.answer.send(Answer::Alone);
        }
    }
}

impl<D: Dialect> SqlLockProvider<D> {
    /// Whether this acquire should queue for a batch: the dialect batches, the provider has
    /// connections of its own, and all of them are busy.
    pub(super) fn should_queue(&self) -> bool {
        D::MAX_ACQUIRE_BATCH > 1 && self.connections.all_busy()
    }

    /// Queues the acquire for the next batch and waits for its answer.
    pub(super) async fn acquire_queued(&self, config: &LockConfiguration) -> Answer {
        let (answer, receiver) = oneshot::channel();
        let waiter = Waiter {
            config: config.clone(),
            answer,
        };
        if self.queue.push(waiter) {
            self.spawn_batch();
        }
        // The batch task went away without answering (the runtime is shutting down): alone.
        receiver.await.unwrap_or(Answer::Alone)
    }

    /// Starts a task that sends the next batch.
    fn spawn_batch(&self) {
        tokio::spawn(self.clone().send_batch());
    }

    /// Waits for a connection, takes the queued acquires, sends them as one statement
    /// (retried like any other) and answers each waiter.
    async fn send_batch(self) {
        let mut batch: Option<Vec<Waiter>> = None;
        let mut collector = Collector {
            queue: &self.queue,
            done: false,
        };
        let (sql, holder) = (&*self.sql, &*self.holder);
        let outcome = run!(self, |c| {
            // Taken once a connection is ours, so that it holds everything queued until now.
            let waiters = batch.get_or_insert_with(|| {
                collector.done = true;
                let (waiters, more) = self.queue.take(D::MAX_ACQUIRE_BATCH);
                if more {
                    self.spawn_batch();
                }
                waiters
            });
            D::acquire_batch(c, sql, holder, waiters.iter().map(|w| &w.config))
        });
        drop(collector);
        let Some(waiters) = batch else { return };
        let mut won: HashMap<String, _> = match outcome {
            Ok(won) => won.into_iter().collect(),
            // The conflict persisted: "not acquired", as for an acquire alone.
            Err(None) => HashMap::new(),
            Err(Some(e)) => {
                tracing::debug!(error = %e, "batched acquire failed; acquiring one by one");
                for waiter in waiters {
                    let _ = waiter.answer.send(Answer::Alone);
                }
                return;
            }
        };
        for waiter in waiters {
            let lease = won
                .remove(waiter.config.name())
                .map(|acquired| self.lease(&waiter.config, acquired))
                .transpose();
            if let Err(Answer::Done(Ok(Some(lease)))) = waiter.answer.send(Answer::Done(lease)) {
                // Its caller went away meanwhile: give the lock back rather than hold it
                // until `lock_until`.
                let _ = self.release(&lease).await;
            }
        }
    }
}
