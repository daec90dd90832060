//! Writes to lock nodes, as ZooKeeper transactions: a lock node is created together with its
//! incarnation child (see `record`), and every later write is a compare-and-set on the node's
//! version that first checks that child, so it can only land on the node it was meant for.
//! Every operation's result in a transaction is checked.

use zookeeper_client::{Client, MultiWriteError, MultiWriteResult, Stat};

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

/// What became of a compare-and-set.
#[derive(Debug)]
pub(crate) enum Set {
    Written(Stat),
    /// Someone wrote the node since the version was read, or deleted it.
    Changed,
    /// The incarnation child is gone: the node was deleted and created again since, or the
    /// child alone was deleted by hand.
    IncarnationGone,
}

impl ZkLockProvider {
    /// Creates lock node `path` holding `data`, with its incarnation child, in one
    /// transaction. `Ok(None)`: the node exists (someone else created it first).
    pub(crate) async fn create_lock_node(
        &self,
        client: &Client,
        path: &str,
        data: &[u8],
        incarnation: &str,
    ) -> Result<Option<Stat>, ZkError> {
        let options = self.session.access().persistent();
        let mut writer = client.new_multi_writer();
        writer.add_create(path, data, &options)?;
        writer.add_create(&format!("{path}/{incarnation}"), &[], &options)?;
        // ZooKeeper before 3.9 returns no `Stat` for a create inside a transaction: writing the
        // same data once more gets one (the node's czxid, and the transaction's mtime).
        writer.add_set_data(path, data, Some(0))?;
        match self.session.bounded(writer.commit()).await? {
            Ok(results) => match results.as_slice() {
                [
                    MultiWriteResult::Create { .. },
                    MultiWriteResult::Create { .. },
                    MultiWriteResult::SetData { stat },
                ] => Ok(Some(*stat)),
                other => Err(unexpected(other)),
            },
            Err(MultiWriteError::OperationFailed {
                index: 0,
                source: zookeeper_client::Error::NodeExists,
            }) => Ok(None),
            Err(error) => Err(zookeeper_client::Error::from(error).into()),
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
        let mut writer = client.new_multi_writer();
        match guard {
            // Version -1: any; only whether the child exists matters.
            Guard::Check(incarnation) => {
                writer.add_check_version(&format!("{path}/{incarnation}"), -1)?;
            }
            Guard::Adopt(incarnation) => {
                let options = self.session.access().persistent();
                writer.add_create(&format!("{path}/{incarnation}"), &[], &options)?;
            }
        }
        writer.add_set_data(path, data, Some(version))?;
        match self.session.bounded(writer.commit()).await? {
            Ok(results) => match results.as_slice() {
                [
                    MultiWriteResult::Check | MultiWriteResult::Create { .. },
                    MultiWriteResult::SetData { stat },
                ] => Ok(Set::Written(*stat)),
                other => Err(unexpected(other)),
            },
            Err(MultiWriteError::OperationFailed { index, source }) => {
                use zookeeper_client::Error::{BadVersion, NoNode, NodeExists};
                match (index, source, guard) {
                    (0, NoNode, Guard::Check(_)) => Ok(Set::IncarnationGone),
                    // Adopting: the node itself is gone, or someone adopted it first.
                    (0, NoNode | NodeExists, Guard::Adopt(_)) | (1, BadVersion | NoNode, _) => {
                        Ok(Set::Changed)
                    }
                    (_, source, _) => Err(source.into()),
                }
            }
            Err(MultiWriteError::RequestFailed { source }) => Err(source.into()),
        }
    }
}

/// A transaction answered with results that do not match its operations.
fn unexpected(results: &[MultiWriteResult]) -> ZkError {
    ZkError::Client(zookeeper_client::Error::UnexpectedError(format!(
        "unexpected transaction results {results:?}"
    )))
}
