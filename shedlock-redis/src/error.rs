//! Redis errors as [`Error::Store`] sources: which server, which key, and what to do about a
//! key of the wrong type. Server addresses are shown without credentials.

use std::fmt;

use shedlock_core::{Error, Operation};

/// A failure of one Redis server, kept as the source of an [`Error::Store`].
#[derive(Debug)]
pub(crate) struct ServerError {
    /// The server, as `redis://host:port/db` (never with a password).
    pub(crate) server: String,
    /// The key the command was for, if any.
    pub(crate) key: Option<String>,
    pub(crate) kind: ServerErrorKind,
}

#[derive(Debug, Clone)]
pub(crate) enum ServerErrorKind {
    /// The client's or the server's error.
    Redis(redis::RedisError),
    /// No answer within the per-server timeout.
    Timeout(std::time::Duration),
    /// Not tried: the server did not answer lately and has not answered a probe since.
    Down,
    /// A script's own error for one lock of a batch, `CODE detail` as Redis shows errors (the
    /// other locks of the batch were answered).
    Script(String),
    /// A reply the scripts never send: someone else's script or data under our key.
    UnexpectedReply(String),
    /// A lock hash field that is missing or not what the scripts write, read by inspection.
    Corrupt(&'static str),
    /// A grant that fewer replicas than asked acknowledged in time (`WAIT`), released again.
    NotAcknowledged {
        replicas: u32,
        acknowledged: u32,
        timeout: std::time::Duration,
    },
}

impl ServerError {
    pub(crate) fn new(server: &str, key: Option<&str>, kind: ServerErrorKind) -> Self {
        ServerError {
            server: server.to_owned(),
            key: key.map(str::to_owned),
            kind,
        }
    }

    /// The same failure for another key: one failed batch call answers each of its locks.
    pub(crate) fn for_key(&self, key: &str) -> Self {
        ServerError {
            server: self.server.clone(),
            key: Some(key.to_owned()),
            kind: self.kind.clone(),
        }
    }

    fn wrong_type(&self) -> bool {
        match &self.kind {
            ServerErrorKind::Redis(error) => {
                error.code() == Some("WRONGTYPE") || error.to_string().contains("WRONGTYPE")
            }
            ServerErrorKind::Script(text) => text.starts_with("WRONGTYPE"),
            _ => false,
        }
    }
}

impl fmt::Display for ServerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let server = &self.server;
        match (&self.key, &self.kind) {
            (Some(key), _) if self.wrong_type() => write!(
                f,
                "Redis {server}: key `{key}` holds a value that is not a shedlock lock hash \
                 (WRONGTYPE): another program uses this key; choose another key prefix"
            ),
            // The scripts' own error for a lock hash they cannot read (see `scripts`).
            (_, ServerErrorKind::Redis(error)) if error.code() == Some("CORRUPT") => write!(
                f,
                "Redis {server}: corrupt {}",
                error.detail().unwrap_or_default()
            ),
            // rustls: "invalid peer certificate: UnknownIssuer" and the like.
            (_, ServerErrorKind::Redis(error))
                if error.to_string().contains("peer certificate") =>
            {
                write!(
                    f,
                    "Redis {server}: {error} (trust the CA that signed the server's certificate: \
                     SSL_CERT_FILE=<its PEM file>, or RedisLockProviderBuilder::\
                     tls_root_certificates)"
                )
            }
            (_, ServerErrorKind::Redis(error)) => write!(f, "Redis {server}: {error}"),
            (_, ServerErrorKind::Script(text)) => match text.strip_prefix("CORRUPT ") {
                Some(detail) => write!(f, "Redis {server}: corrupt {detail}"),
                None => write!(f, "Redis {server}: {text}"),
            },
            (_, ServerErrorKind::Timeout(timeout)) => {
                write!(f, "Redis {server}: no answer within {timeout:?}")
            }
            (_, ServerErrorKind::Down) => write!(
                f,
                "Redis {server}: down (it did not answer lately, and no probe got an answer since)"
            ),
            (Some(key), ServerErrorKind::UnexpectedReply(reply)) => write!(
                f,
                "Redis {server}: unexpected reply for key `{key}`: {reply} (is the key used by \
                 another program?)"
            ),
            (key, ServerErrorKind::Corrupt(field)) => write!(
                f,
                "Redis {server}: corrupt lock hash `{}`: field `{field}` is missing or not a \
                 whole number below 2^53",
                key.as_deref().unwrap_or_default()
            ),
            (
                _,
                ServerErrorKind::NotAcknowledged {
                    replicas,
                    acknowledged,
                    timeout,
                },
            ) => write!(
                f,
                "Redis {server}: granted, but {acknowledged} of the {replicas} replicas asked for \
                 (wait_for_replicas) acknowledged the grant within {timeout:?}; released again, \
                 since a failover to a replica without it would grant the lock twice"
            ),
            (None, ServerErrorKind::UnexpectedReply(reply)) => {
                write!(f, "Redis {server}: unexpected reply: {reply}")
            }
        }
    }
}

impl std::error::Error for ServerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ServerErrorKind::Redis(error) => Some(error),
            _ => None,
        }
    }
}

/// Too few RedLock masters answered for the operation to decide anything.
#[derive(Debug)]
pub(crate) struct QuorumError {
    pub(crate) masters: usize,
    pub(crate) quorum: usize,
    pub(crate) failures: Vec<ServerError>,
}

impl fmt::Display for QuorumError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} of {} Redis masters failed, a majority of {} must answer",
            self.failures.len(),
            self.masters,
            self.quorum
        )?;
        for failure in &self.failures {
            write!(f, "; {failure}")?;
        }
        Ok(())
    }
}

impl std::error::Error for QuorumError {}

/// Wraps a server failure as [`Error::Store`].
pub(crate) fn store_error(operation: Operation, lock_name: &str, error: ServerError) -> Error {
    Error::store(operation, lock_name, error)
}
