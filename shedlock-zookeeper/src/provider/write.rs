//! Writes to lock nodes, as ZooKeeper transactions: a lock node is created together with its
//! incarnation child (see `record`), and every later write is a compare-and-set on the node's
//! version that first checks that child, so it can only land on the node it was meant for.
//! Every operation's result in a transaction is checked. A batch of acquisitions puts the
//! operations of several writes in one transaction (`batch`).

use std::future::Future;
use std::pin::Pin;

use zookeeper_client::{Client, MultiWriteError, MultiWriteResult, MultiWriter, Stat};

use super::ZkLockProvider;
use crate::error::ZkError;

/// How a compare-and-set is guarded.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Guard<'a> {
    /// The node is the incarnation with this child.
    Check(&'a str),
    /// The node has no incarnation child yet (written by hand): give it this one.
    Adopt(&'a str),
}

/// What became of a write.
#[derive(Debug)]
pub(crate) enum Set {
    Written(Stat),
    /// Someone wrote the node since the version was read, or deleted it; or, for a create,
    /// created it first.
    Changed,
    /// The incarnation child is gone: the node was deleted and created again since, or the
    /// child alone was deleted by hand.
    IncarnationGone,
}

/// A transaction sent, its answer to come.
pub(crate) type Committed<'c> =
    Pin<Box<dyn Future<Output = Result<Vec<MultiWriteResult>, MultiWriteError>> + Send + 'c>>;

/// One write to a lock node: the operations it adds to a transaction, and how to read their
/// results.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LockWrite<'a> {
    /// Creates the node holding `data`, with its incarnation child.
    Create {
        path: &'a str,
        data: &'a [u8],
        incarnation: &'a str,
    },
    /// Writes `data` over version `version` of the node, guarded by `guard`.
    Set {
        path: &'a str,
        data: &'a [u8],
        version: i32,
        guard: Guard<'a>,
    },
}

impl LockWrite<'_> {
    /// How many operations it adds to a transaction.
    pub(crate) fn ops(&self) -> usize {
        match self {
            LockWrite::Create { .. } => 3,
            LockWrite::Set { .. } => 2,
        }
    }

    pub(crate) fn add_to(
        &self,
        writer: &mut MultiWriter<'_>,
        provider: &ZkLockProvider,
    ) -> Result<(), ZkError> {
        let options = provider.session.access().persistent();
        match *self {
            LockWrite::Create {
                path,
                data,
                incarnation,
            } => {
                writer.add_create(path, data, &options)?;
                writer.add_create(&format!("{path}/{incarnation}"), &[], &options)?;
                // ZooKeeper before 3.9 returns no `Stat` for a create inside a transaction:
                // writing the same data once more gets one (the node's czxid, and the
                // transaction's mtime).
                writer.add_set_data(path, data, Some(0))?;
            }
            LockWrite::Set {
                path,
                data,
                version,
                guard,
            } => {
                match guard {
                    // Version -1: any; only whether the child exists matters.
                    Guard::Check(incarnation) => {
                        writer.add_check_version(&format!("{path}/{incarnation}"), -1)?;
                    }
                    Guard::Adopt(incarnation) => {
                        writer.add_create(&format!("{path}/{incarnation}"), &[], &options)?;
                    }
                }
                writer.add_set_data(path, data, Some(version))?;
            }
        }
        Ok(())
    }

    /// The written node's `Stat`, from this write's results in a committed transaction.
    pub(crate) fn written(&self, results: &[MultiWriteResult]) -> Result<Stat, ZkError> {
        match (self, results) {
            (
                LockWrite::Create { .. },
                [
                    MultiWriteResult::Create { .. },
                    MultiWriteResult::Create { .. },
                    MultiWriteResult::SetData { stat },
                ],
            )
            | (
                LockWrite::Set { .. },
                [
                    MultiWriteResult::Check | MultiWriteResult::Create { .. },
                    MultiWriteResult::SetData { stat },
                ],
            ) => Ok(*stat),
            (_, other) => Err(unexpected(other)),
        }
    }

    /// What became of this write when its operation `index` (counted from its first) failed
    /// the transaction.
    pub(crate) fn failed(
        &self,
        index: usize,
        source: zookeeper_client::Error,
    ) -> Result<Set, ZkError> {
        use zookeeper_client::Error::{BadVersion, NoNode, NodeExists};
        match (self, index, source) {
            (LockWrite::Create { .. }, 0, NodeExists) => Ok(Set::Changed),
            (
                LockWrite::Set {
                    guard: Guard::Check(_),
                    ..
                },
                0,
                NoNode,
            ) => Ok(Set::IncarnationGone),
            // Adopting: the node itself is gone, or someone adopted it first.
            (
                LockWrite::Set {
                    guard: Guard::Adopt(_),
                    ..
                },
                0,
                NoNode | NodeExists,
            )
            | (LockWrite::Set { .. }, 1, BadVersion | NoNode) => Ok(Set::Changed),
            (_, _, source) => Err(source.into()),
        }
    }
}

impl ZkLockProvider {
    /// Commits `write` as a transaction of its own.
    pub(crate) async fn commit(
        &self,
        client: &Client,
        write: LockWrite<'_>,
    ) -> Result<Set, ZkError> {
        let sent = self.send(client, write);
        self.outcome(write, sent).await
    }

    /// Sends `write` as a transaction of its own, at once: the request leaves before the
    /// answer is awaited, so several sent one after the other share a round trip.
    pub(crate) fn send<'c>(
        &self,
        client: &'c Client,
        write: LockWrite<'_>,
    ) -> Result<Committed<'c>, ZkError> {
        let mut writer = client.new_multi_writer();
        write.add_to(&mut writer, self)?;
        Ok(Box::pin(writer.commit()))
    }

    /// What became of `write`, sent by [`send`](Self::send).
    pub(crate) async fn outcome(
        &self,
        write: LockWrite<'_>,
        sent: Result<Committed<'_>, ZkError>,
    ) -> Result<Set, ZkError> {
        match self.session.bounded(sent?).await? {
            Ok(results) => write.written(&results).map(Set::Written),
            Err(MultiWriteError::OperationFailed { index, source }) => write.failed(index, source),
            Err(MultiWriteError::RequestFailed { source }) => Err(source.into()),
        }
    }

    /// Writes `data` over version `version` of lock node `path`, guarded by `guard`.
    pub(crate) async fn set_lock_node(
        &self,
        client: &Client,
        path: &str,
        data: &[u8],
        version: i32,
        guard: Guard<'_>,
    ) -> Result<Set, ZkError> {
        let write = LockWrite::Set {
            path,
            data,
            version,
            guard,
        };
        self.commit(client, write).await
    }
}

/// A transaction answered with results that do not match its operations.
fn unexpected(results: &[MultiWriteResult]) -> ZkError {
    ZkError::Client(zookeeper_client::Error::UnexpectedError(format!(
        "unexpected transaction results {results:?}"
    )))
}
