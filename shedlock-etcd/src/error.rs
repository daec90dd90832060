//! What goes wrong talking to etcd, as the `source` of a shedlock [`Error::Store`].

use std::time::Duration;

use shedlock_core::{Error, Operation};

/// The etcd side of an [`Error::Store`]. No variant holds a password or a token.
#[derive(Debug, thiserror::Error)]
pub(crate) enum EtcdError {
    #[error("etcd answered {code:?}: {message}")]
    Status { code: tonic::Code, message: String },
    #[error("no answer from etcd within {0:?} (cluster unreachable or without quorum?)")]
    Timeout(Duration),
    #[error("etcd connection failed: {0}")]
    Transport(String),
    #[error("etcd closed the stream")]
    Closed,
    #[error("invalid etcd endpoint {endpoint}: {message}")]
    Endpoint { endpoint: String, message: String },
    #[error("etcd refused the credentials of user `{user}`: {reason}")]
    AuthFailed { user: String, reason: String },
    #[error("etcd refused a lease: {0}")]
    Lease(String),
    #[error(
        "key {key} holds a value shedlock did not write ({reason}); delete it (etcdctl del {key}) to reset the lock (tokens keep increasing)"
    )]
    Unreadable { key: String, reason: String },
}

impl EtcdError {
    pub(crate) fn from_status(status: tonic::Status) -> Self {
        let mut message = status.message().to_owned();
        if message.is_empty() {
            // A transport failure: the cause is in the source chain, not the message.
            let mut source = std::error::Error::source(&status);
            while let Some(cause) = source {
                if !message.is_empty() {
                    message.push_str(": ");
                }
                message.push_str(&cause.to_string());
                source = cause.source();
            }
        }
        EtcdError::Status {
            code: status.code(),
            message,
        }
    }

    /// The member could not be reached or could not serve: another may.
    pub(crate) fn is_unavailable(&self) -> bool {
        match self {
            EtcdError::Status { code, .. } => {
                matches!(code, tonic::Code::Unavailable | tonic::Code::Unknown)
            }
            EtcdError::Transport(_) | EtcdError::Closed => true,
            _ => false,
        }
    }

    /// The request never left this process: no connection to the member could be made.
    pub(crate) fn is_connect_failure(&self) -> bool {
        let text = match self {
            EtcdError::Status { message, .. } => message,
            EtcdError::Transport(message) => message,
            _ => return false,
        };
        text.contains("tcp connect error")
            || text.contains("Connection refused")
            || text.contains("error trying to connect")
    }

    /// A write named a lease that no longer exists (revoked, or run out).
    pub(crate) fn is_lease_not_found(&self) -> bool {
        matches!(self, EtcdError::Status { message, .. } if message.contains("lease not found"))
    }

    /// etcd's simple tokens expire (5 minutes by default): authenticate again.
    pub(crate) fn is_expired_token(&self) -> bool {
        matches!(self, EtcdError::Status { message, .. }
            if message.contains("invalid auth token") || message.contains("auth revision is old"))
    }

    pub(crate) fn into_store(self, operation: Operation, lock_name: &str) -> Error {
        Error::store(operation, lock_name, self)
    }
}
