//! Acquisitions sent together: the batches the scheduler asks for
//! ([`LockProvider::acquire_many`]), and acquires queued while every connection is busy (group
//! commit, no timers). Both go through the dialect's
//! [`acquire_batch`](super::Dialect::acquire_batch).
//!
//! A batch of `acquire_many` is sorted by name and sent in chunks of the dialect's
//! [`MAX_ACQUIRE_BATCH`](super::Dialect::MAX_ACQUIRE_BATCH), one round trip each on
//! PostgreSQL; the answers come back in the order asked.
//!
//! While a connection is free, an acquire goes alone, as one statement. When all the
//! provider's connections are busy, acquires wait in a queue instead of for a connection each;
//! the next connection to become free takes every queued acquire (up to the dialect's
//! [`MAX_ACQUIRE_BATCH`](super::Dialect::MAX_ACQUIRE_BATCH), one per lock name) and sends them
//! as one batch with the same per-row conditions. A fleet firing many jobs at the same
//! tick then costs the database a few statements per instance instead of one per job.
//!
//! The batch runs in a task of its own, so a waiter that goes away (its future dropped) does
//! not abandon the others; a lease won for it is released.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use futures_util::future::join_all;
use shedlock_core::{Error, LockConfiguration, LockLease, LockProvider, Operation};
use tokio::sync::oneshot;

use super::retry::run;
use super::{SqlLockProvider, answer_may_be_lost};
use crate::{Acquired, Dialect, store_error};

/// One lock's answer to a batch.
type Answered = Result<Option<LockLease>, Error>;

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
        // In name order, as the dialect's batch expects.
        batch.sort_unstable_by(|a, b| a.config.name().cmp(b.config.name()));
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

impl<D: Dialect> SqlLockProvider<D> {
    /// `acquire_many` on a dialect that batches: the locks sorted by name (so that the row
    /// locks of two instances' batches are taken in one order and never deadlock), in chunks
    /// of `MAX_ACQUIRE_BATCH` sent at once, answered in the order asked.
    pub(super) async fn acquire_sorted(&self, configs: &[LockConfiguration]) -> Vec<Answered> {
        let mut order: Vec<usize> = (0..configs.len()).collect();
        order.sort_unstable_by_key(|&i| configs[i].name());
        // A statement may write a row only once; the scheduler never repeats a name, but
        // another caller might: those batches go one lock at a time, as by default.
        if order
            .windows(2)
            .any(|pair| configs[pair[0]].name() == configs[pair[1]].name())
        {
            return join_all(configs.iter().map(|config| self.acquire(config))).await;
        }
        let chunks = order.chunks(D::MAX_ACQUIRE_BATCH);
        let answered = join_all(chunks.clone().map(|chunk| {
            let chunk: Vec<&LockConfiguration> = chunk.iter().map(|&i| &configs[i]).collect();
            async move { self.acquire_chunk(&chunk).await }
        }))
        .await;
        let mut answers: Vec<Option<Answered>> = configs.iter().map(|_| None).collect();
        for (chunk, outcomes) in chunks.zip(answered) {
            for (&i, outcome) in chunk.iter().zip(outcomes) {
                answers[i] = Some(outcome);
            }
        }
        answers
            .into_iter()
            .map(|answer| answer.expect("every lock of a chunk is answered"))
            .collect()
    }

    /// One chunk (sorted, distinct names), one call of `acquire_batch`: each lock answered as
    /// its acquire alone would be, lost answers included.
    async fn acquire_chunk(&self, configs: &[&LockConfiguration]) -> Vec<Answered> {
        let in_flight: Vec<_> = configs
            .iter()
            .map(|c| self.claims.begin(c.name()))
            .collect();
        let (sql, holder) = (&*self.sql, &*self.holder);
        let started = Instant::now();
        let mut reconnected = false;
        let outcome = run!(self, reconnected = reconnected, |c| D::acquire_batch(
            c,
            sql,
            holder,
            configs.iter().copied()
        ));
        match outcome {
            Ok(won) => {
                let mut won: HashMap<String, Acquired> = won.into_iter().collect();
                let won: Vec<Option<Acquired>> =
                    configs.iter().map(|c| won.remove(c.name())).collect();
                join_all(configs.iter().zip(won).zip(&in_flight).map(
                    |((config, acquired), in_flight)| async move {
                        match acquired {
                            Some(acquired) => self.lease(config, acquired).map(Some),
                            // Ran again on a new connection after the first broke: the first
                            // may have been granted this lock, which the second then found
                            // held.
                            None if reconnected && in_flight.alone() => {
                                Ok(self.adopt_lost_grant(config, started).await)
                            }
                            None => Ok(None),
                        }
                    },
                ))
                .await
            }
            Err(Some(e)) if !D::is_busy(&e) => {
                let lost = answer_may_be_lost(&e);
                let error = store_error(Operation::Acquire, configs[0].name(), &self.table, e);
                tracing::debug!(%error, locks = configs.len(), "batched acquire failed");
                // One error per lock (errors are not `Clone`), each naming its lock.
                let text = match &error {
                    Error::Store { source, .. } => source.to_string(),
                    other => other.to_string(),
                };
                let mut first = Some(error);
                let mut answers = Vec::with_capacity(configs.len());
                for (config, in_flight) in configs.iter().zip(&in_flight) {
                    // The original error names the first lock: it goes to that one.
                    let error = first.take().unwrap_or_else(|| {
                        Error::store(Operation::Acquire, config.name(), text.clone())
                    });
                    if lost
                        && in_flight.alone()
                        && let Some(lease) = self.adopt_lost_grant(config, started).await
                    {
                        answers.push(Ok(Some(lease)));
                    } else {
                        answers.push(Err(error));
                    }
                }
                answers
            }
            // Busy (SQLite), or the conflict persisted: "not acquired", as for an acquire
            // alone.
            Err(e) => {
                let error = e.map(|e| e.to_string());
                tracing::debug!(
                    ?error,
                    locks = configs.len(),
                    "database busy: batch not acquired this time"
                );
                configs.iter().map(|_| Ok(None)).collect()
            }
        }
    }
}
