//! `acquire_many`: a batch of acquisitions in two round trips, whatever its size up to
//! [`CHUNK`] locks: "now" (the clock write) and every lock node's read (one `multiRead`,
//! ZooKeeper 3.6 and later), pipelined; then one transaction with the writes of every lock
//! granted. Each lock is decided exactly as `acquire` decides it (`claim`).
//!
//! A ZooKeeper transaction is all or nothing, and tells only its first failed operation: when
//! a lock was written by someone else between the read and the transaction, that lock is
//! answered by its failure (as `acquire` would be) and the others are written each in its own
//! transaction, all at once, on what was read: one more round trip. Retrying the transaction
//! without the failed lock instead would cost a round trip per lock lost to a race, since each
//! retry finds only the next one.
//!
//! Requests leave when they are made, not when their answers are awaited (the client sends at
//! once), so the requests of one step are all made first and their answers awaited after:
//! one round trip for all of them.

use std::future::Future;

use shedlock_core::{Error, LockConfiguration, LockLease, LockProvider, Operation};
use zookeeper_client::{Client, MultiReadResult, MultiWriteError, Stat};

use super::ZkLockProvider;
use super::claim::Claim;
use super::write::{Committed, Set};
use crate::error::ZkError;

/// The most locks one request reads or writes: a create is three operations of a path and a
/// record each (well under 1 KiB with the longest names and holders), so a transaction stays
/// far below ZooKeeper's default request limit (`jute.maxbuffer`, 1 MiB).
const CHUNK: usize = 200;

type Answer = Result<Option<LockLease>, Error>;

/// A lock node as read: its data and `Stat`, or why not (`NoNode`: there is none).
type Node = Result<(Vec<u8>, Stat), ZkError>;

impl ZkLockProvider {
    pub(super) async fn acquire_batch(&self, configs: &[LockConfiguration]) -> Vec<Answer> {
        match configs {
            [] => return Vec::new(),
            [config] => return vec![self.acquire(config).await],
            _ => {}
        }
        // Sorted: a deterministic order of every request's operations.
        let mut order: Vec<usize> = (0..configs.len()).collect();
        order.sort_unstable_by_key(|&i| configs[i].name());
        let client = match self.session.client().await {
            Ok(client) => client,
            Err(error) => return configs.iter().map(|c| each(c, &error)).collect(),
        };
        let chunks: Vec<&[usize]> = order.chunks(CHUNK).collect();
        // As in `acquire`: ZooKeeper answers a session's requests in order, so every node is
        // read after "now" was taken.
        let clock = client.set_data(&self.paths.clock, &[], None);
        let reads: Vec<_> = chunks
            .iter()
            .map(|chunk| self.read_nodes(&client, configs, chunk))
            .collect();
        let now = match self.session.timed(clock).await {
            Ok(stat) => stat.mtime,
            Err(error) => {
                let error = self.schema_error(&self.paths.clock, error);
                return configs.iter().map(|c| each(c, &error)).collect();
            }
        };
        let mut answers: Vec<Option<Answer>> = configs.iter().map(|_| None).collect();
        let mut claims = Vec::new();
        for (chunk, read) in chunks.into_iter().zip(reads) {
            match read.await {
                Ok(nodes) => {
                    for (&i, node) in chunk.iter().zip(nodes) {
                        match self.claim(&configs[i], node, now) {
                            Ok(Some(claim)) => claims.push((i, claim)),
                            other => answers[i] = Some(other.map(|_| None)),
                        }
                    }
                }
                Err(ZkError::Client(zookeeper_client::Error::Unimplemented)) => {
                    // A server before 3.6 (no multiRead): one acquire per lock.
                    return join_acquires(self, configs).await;
                }
                Err(error) => {
                    for &i in chunk {
                        answers[i] = Some(each(&configs[i], &error));
                    }
                }
            }
        }
        let mut chunks = Vec::new();
        let mut claims = claims.into_iter().peekable();
        while claims.peek().is_some() {
            let chunk: Vec<(usize, Claim)> = claims.by_ref().take(CHUNK).collect();
            let sent = self.send_claims(&client, &chunk);
            chunks.push((chunk, sent));
        }
        for (chunk, sent) in chunks {
            for (i, answer) in self.write_claims(&client, configs, chunk, sent, now).await {
                answers[i] = Some(answer);
            }
        }
        answers
            .into_iter()
            .map(|answer| answer.expect("every lock of the batch answered"))
            .collect()
    }

    /// Reads the lock nodes of `chunk` (indexes into `configs`) in one `multiRead`, sent at
    /// once.
    fn read_nodes<'c>(
        &self,
        client: &'c Client,
        configs: &[LockConfiguration],
        chunk: &[usize],
    ) -> impl Future<Output = Result<Vec<Node>, ZkError>> + 'c {
        let mut reader = client.new_multi_reader();
        let added = chunk
            .iter()
            .try_for_each(|&i| reader.add_get_data(&self.paths.lock(configs[i].name())));
        let sent = added.map(|()| reader.commit());
        let (session, expected) = (std::sync::Arc::clone(&self.session), chunk.len());
        async move {
            let results = session.timed(sent?).await?;
            if results.len() != expected {
                return Err(unexpected(format!(
                    "{} results for {expected} reads",
                    results.len()
                )));
            }
            Ok(results
                .into_iter()
                .map(|result| match result {
                    MultiReadResult::Data { data, stat } => Ok((data, stat)),
                    MultiReadResult::Error { err } => Err(err.into()),
                    other => Err(unexpected(format!("unexpected read result {other:?}"))),
                })
                .collect())
        }
    }

    /// Sends the writes of `claims` as one transaction, at once.
    fn send_claims<'c>(
        &self,
        client: &'c Client,
        claims: &[(usize, Claim)],
    ) -> Result<Committed<'c>, ZkError> {
        let mut writer = client.new_multi_writer();
        for (_, claim) in claims {
            claim.write().add_to(&mut writer, self)?;
        }
        Ok(Box::pin(writer.commit()))
    }

    /// The answers for `claims`, whose transaction was `sent`: if it failed on one lock's
    /// write, that lock is answered by its failure and the others are written each on its own.
    async fn write_claims(
        &self,
        client: &Client,
        configs: &[LockConfiguration],
        claims: Vec<(usize, Claim)>,
        sent: Result<Committed<'_>, ZkError>,
        now: i64,
    ) -> Vec<(usize, Answer)> {
        let committed = match sent {
            Ok(sent) => self.session.bounded(sent).await,
            Err(error) => Err(error),
        };
        let (index, source) = match committed {
            Ok(Ok(results)) => {
                let mut answers = Vec::with_capacity(claims.len());
                let mut results = results.as_slice();
                for (i, claim) in claims {
                    let write = claim.write();
                    let (own, rest) = results.split_at(write.ops().min(results.len()));
                    results = rest;
                    let outcome = write.written(own).map(Set::Written);
                    answers.push((
                        i,
                        self.settle(client, &configs[i], claim, outcome, now).await,
                    ));
                }
                return answers;
            }
            Ok(Err(MultiWriteError::OperationFailed { index, source })) => (index, source),
            Ok(Err(MultiWriteError::RequestFailed { source })) => {
                let error = ZkError::from(source);
                return answer_all(configs, claims, &error);
            }
            Err(error) => return answer_all(configs, claims, &error),
        };
        // Nothing was written. Each lock's own transaction is sent before any is awaited.
        let mut source = Some(source);
        let mut start = 0;
        let mut retries = Vec::with_capacity(claims.len());
        for (i, claim) in claims {
            let ops = claim.write().ops();
            let failure = index
                .checked_sub(start)
                .filter(|&at| at < ops)
                .and_then(|at| Some((at, source.take()?)));
            start += ops;
            let sent = match failure {
                Some((at, source)) => Err(claim.write().failed(at, source)),
                None => Ok(self.send(client, claim.write())),
            };
            retries.push((i, claim, sent));
        }
        let mut answers = Vec::with_capacity(retries.len());
        for (i, claim, sent) in retries {
            let outcome = match sent {
                Err(outcome) => outcome,
                Ok(sent) => self.outcome(claim.write(), sent).await,
            };
            answers.push((
                i,
                self.settle(client, &configs[i], claim, outcome, now).await,
            ));
        }
        answers
    }

    /// `error`, seen where `path` was written: a missing parent means a missing schema.
    pub(super) fn schema_error(&self, path: &str, error: ZkError) -> ZkError {
        match error {
            ZkError::Client(zookeeper_client::Error::NoNode) => ZkError::MissingSchema {
                path: path.to_owned(),
                root: self.paths.root.clone(),
            },
            other => other,
        }
    }
}

/// The answer for `config` when the request it was in failed with `error` (which is not
/// `Clone`: each lock gets its text).
fn each(config: &LockConfiguration, error: &impl std::fmt::Display) -> Answer {
    Err(Error::store(
        Operation::Acquire,
        config.name(),
        error.to_string(),
    ))
}

fn answer_all(
    configs: &[LockConfiguration],
    claims: Vec<(usize, Claim)>,
    error: &ZkError,
) -> Vec<(usize, Answer)> {
    claims
        .into_iter()
        .map(|(i, _)| (i, each(&configs[i], error)))
        .collect()
}

fn unexpected(what: String) -> ZkError {
    ZkError::Client(zookeeper_client::Error::UnexpectedError(what))
}

/// One acquire per lock, all at once (each a task of its own).
async fn join_acquires(provider: &ZkLockProvider, configs: &[LockConfiguration]) -> Vec<Answer> {
    let tasks: Vec<_> = configs
        .iter()
        .map(|config| {
            let (provider, config) = (provider.clone(), config.clone());
            tokio::spawn(async move { provider.acquire(&config).await })
        })
        .collect();
    let mut answers = Vec::with_capacity(tasks.len());
    for (task, config) in tasks.into_iter().zip(configs) {
        answers.push(task.await.unwrap_or_else(|error| each(config, &error)));
    }
    answers
}
