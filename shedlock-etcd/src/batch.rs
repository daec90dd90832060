//! `acquire_many`: a batch of acquisitions in as many round trips as one acquisition, whatever
//! its size: one read of the records and last ticks the locks need read (`reads`, per 64
//! locks), then the etcd leases of the locks still in, granted all at once, then one
//! transaction per 100 locks holding a nested transaction per lock (etcd 3.3 and later) with
//! exactly that lock's compares and writes: each lock is granted or refused on its own, as
//! `acquire` would be, and a lock another instance took between the read and the transaction
//! refuses only itself. The leases stay one (two, with `lock_at_least_for`) per lock: a release
//! or an extension revokes its lock's lease (so do an operator's release and the end of a
//! minimum hold), which would end every lock on a shared one.

use futures_util::future::join_all;
use shedlock_core::{Error, LockConfiguration, LockLease, LockProvider, Operation};

use crate::EtcdLockProvider;
use crate::claim::{Attempt, Read};
use crate::record::now_ms;
use crate::wire::{self, RequestOp, TxnRequest};

/// Locks per read: two ranges each, within etcd's default limit of 128 operations per
/// transaction (`--max-txn-ops`).
const READ_CHUNK: usize = 64;

/// Locks per granting transaction: one nested transaction each. etcd holds each nested
/// transaction to what the outer one leaves of that limit (at most 4 compares, 4 writes and 3
/// reads are needed; 100 locks leave 28).
const GRANT_CHUNK: usize = 100;

type Answer = Result<Option<LockLease>, Error>;

impl EtcdLockProvider {
    pub(crate) async fn acquire_batch(&self, configs: &[LockConfiguration]) -> Vec<Answer> {
        match configs {
            [] => return Vec::new(),
            [config] => return vec![self.acquire(config).await],
            _ => {}
        }
        // Sorted: a deterministic order of every request's operations.
        let mut order: Vec<usize> = (0..configs.len()).collect();
        order.sort_unstable_by_key(|&i| configs[i].name());
        let mut answers: Vec<Option<Answer>> = configs.iter().map(|_| None).collect();

        // Locks that read nothing are decided already.
        let mut decided: Vec<(usize, Read)> = Vec::new();
        let mut to_read = Vec::new();
        for &i in &order {
            match self.reads(&configs[i]) {
                ops if ops.is_empty() => decided.push((i, Read::default())),
                ops => to_read.push((i, ops)),
            }
        }
        let chunks: Vec<_> = to_read.chunks(READ_CHUNK).collect();
        let reads = join_all(chunks.iter().map(|chunk| {
            self.client.read_txn(TxnRequest {
                compare: Vec::new(),
                success: chunk.iter().flat_map(|(_, ops)| ops.clone()).collect(),
                failure: Vec::new(),
            })
        }))
        .await;
        for (chunk, read) in chunks.into_iter().zip(reads) {
            match read {
                Ok(read) => {
                    for (k, (i, _)) in chunk.iter().enumerate() {
                        match self.decide(&configs[*i], read.range(2 * k), read.range(2 * k + 1)) {
                            Ok(Some(read)) => decided.push((*i, read)),
                            other => answers[*i] = Some(other.map(|_| None)),
                        }
                    }
                }
                Err(error) => {
                    for (i, _) in chunk {
                        answers[*i] = Some(Err(each(&configs[*i], &error)));
                    }
                }
            }
        }
        decided.sort_unstable_by_key(|(i, _)| configs[*i].name());

        // Read before the grants, as in `acquire`.
        let locked_at = now_ms();
        let leases = join_all(decided.iter().map(|(i, _)| self.grant_leases(&configs[*i]))).await;
        let mut attempts = Vec::with_capacity(decided.len());
        for ((i, read), leases) in decided.into_iter().zip(leases) {
            match leases {
                Ok(leases) => {
                    attempts.push((i, self.attempt(&configs[i], read, locked_at, leases)))
                }
                Err(error) => answers[i] = Some(Err(error)),
            }
        }
        let mut chunks = Vec::new();
        let mut attempts = attempts.into_iter().peekable();
        while attempts.peek().is_some() {
            let chunk: Vec<_> = attempts.by_ref().take(GRANT_CHUNK).collect();
            chunks.push(self.grant_chunk(configs, chunk));
        }
        for (i, answer) in join_all(chunks).await.into_iter().flatten() {
            answers[i] = Some(answer);
        }
        answers
            .into_iter()
            .map(|answer| answer.expect("every lock of the batch answered"))
            .collect()
    }

    /// Sends the attempts of `chunk` in one transaction, one nested transaction each.
    async fn grant_chunk(
        &self,
        configs: &[LockConfiguration],
        chunk: Vec<(usize, Attempt)>,
    ) -> Vec<(usize, Answer)> {
        let request = TxnRequest {
            compare: Vec::new(),
            success: chunk
                .iter()
                .map(|(_, attempt)| RequestOp {
                    request: Some(wire::Request::Txn(attempt.request())),
                })
                .collect(),
            failure: Vec::new(),
        };
        let response = self.client.txn(request).await;
        let mut answers = Vec::with_capacity(chunk.len());
        match response {
            Ok(outer) => {
                let mut nested = outer.responses.into_iter();
                for (i, attempt) in chunk {
                    let config = &configs[i];
                    let response = match nested.next().and_then(|op| op.response) {
                        Some(wire::Response::Txn(mut txn)) => {
                            // Every key the transaction wrote is at its revision: the token.
                            txn.header.clone_from(&outer.header);
                            Ok(txn)
                        }
                        other => Err(each(
                            config,
                            &format!("etcd answered a nested transaction with {other:?}"),
                        )),
                    };
                    answers.push((i, self.finish(config, attempt, response).await));
                }
            }
            Err(error) => {
                for (i, attempt) in chunk {
                    let config = &configs[i];
                    let failed = Err(each(config, &error));
                    answers.push((i, self.finish(config, attempt, failed).await));
                }
            }
        }
        answers
    }
}

/// The error for `config` when the request it was in failed with `error` (which is not
/// `Clone`: each lock gets its text).
fn each(config: &LockConfiguration, error: &impl std::fmt::Display) -> Error {
    Error::store(Operation::Acquire, config.name(), error.to_string())
}
