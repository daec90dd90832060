//! What goes wrong talking to ZooKeeper, as the `source` of a shedlock [`Error::Store`].

use std::time::Duration;

use shedlock_core::{Error, Operation};

/// The ZooKeeper side of an [`Error::Store`].
#[derive(Debug, thiserror::Error)]
pub(crate) enum ZkError {
    #[error("ZooKeeper: {0}")]
    Client(zookeeper_client::Error),
    #[error(
        "ZooKeeper refused the request (not authorized): the node's ACL does not grant this session's credentials; configure `digest_auth` with the user that created the nodes"
    )]
    NotAuthorized,
    #[error("no answer from ZooKeeper within {0:?} (ensemble unreachable or without quorum?)")]
    Timeout(Duration),
    #[error("cannot connect to ZooKeeper at {connect_string}: {source}")]
    Connect {
        connect_string: String,
        source: zookeeper_client::Error,
    },
    #[error(
        "node {path} does not exist: run `create_schema()` once (it creates {root}/clock, {root}/locks and {root}/elections)"
    )]
    MissingSchema { path: String, root: String },
    #[error("node {path}: {source}")]
    At {
        path: String,
        #[source]
        source: Box<ZkError>,
    },
    #[error(
        "lock node {path} holds data shedlock did not write ({reason}); delete it with what is below it (zkCli: `deleteall {path}`) to reset the lock (tokens keep increasing)"
    )]
    Unreadable { path: String, reason: String },
}

impl From<zookeeper_client::Error> for ZkError {
    fn from(error: zookeeper_client::Error) -> Self {
        match error {
            zookeeper_client::Error::NoAuth => ZkError::NotAuthorized,
            other => ZkError::Client(other),
        }
    }
}

impl ZkError {
    /// This error, naming the node it happened at.
    pub(crate) fn at(self, path: &str) -> Self {
        ZkError::At {
            path: path.to_owned(),
            source: Box::new(self),
        }
    }

    pub(crate) fn into_store(self, operation: Operation, lock_name: &str) -> Error {
        Error::store(operation, lock_name, self)
    }
}

/// Whether the session of this error is gone for good: a new one must be opened.
pub(crate) fn session_ended(error: &zookeeper_client::Error) -> bool {
    use zookeeper_client::Error::*;
    matches!(
        error,
        SessionExpired | SessionMoved | ClientClosed | AuthFailed
    )
}
