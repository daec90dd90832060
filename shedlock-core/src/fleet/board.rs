//! The small keyed store a fleet's jobs and switches live in: what every store implements.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use crate::Error;

/// Longest key a [`Board`] must hold, in bytes: a prefix, a job name and an instance's name
/// ([`MAX_LOCK_NAME_LEN`](crate::MAX_LOCK_NAME_LEN) + [`MAX_HOLDER_LEN`](crate::MAX_HOLDER_LEN)
/// escaped) fit.
pub const MAX_BOARD_KEY_LEN: usize = 1024;

/// Longest value a [`Board`] must hold, in bytes: one job's definition as its instance
/// publishes it.
pub const MAX_BOARD_VALUE_LEN: usize = 16 * 1024;

/// The condition a [`Board`] write or removal is made under, decided by the store in the same
/// step as the change (compare-and-set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BoardCondition {
    /// Whatever the key holds.
    Always,
    /// Only if the key holds nothing live (never written, removed, or past its expiry).
    Absent,
    /// Only if the key holds the live entry of this [`BoardEntry::version`].
    Version(u64),
}

/// One live entry of a [`Board`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BoardEntry {
    /// Its key.
    pub key: String,
    /// What was written (text; the fleet writes JSON).
    pub value: String,
    /// Changes with every write of the key; what [`BoardCondition::Version`] compares.
    pub version: u64,
    /// When the store wrote it (store clock, millisecond precision at least).
    pub written_at: SystemTime,
    /// When it stops being live (store clock); `None`: kept until removed.
    pub expires_at: Option<SystemTime>,
}

impl BoardEntry {
    /// An entry as a store read it.
    pub fn new(
        key: impl Into<String>,
        value: impl Into<String>,
        version: u64,
        written_at: SystemTime,
        expires_at: Option<SystemTime>,
    ) -> Self {
        BoardEntry {
            key: key.into(),
            value: value.into(),
            version,
            written_at,
            expires_at,
        }
    }
}

/// A small keyed store beside the locks, holding what a fleet publishes of its jobs and what
/// operators switch ([`Fleet`](crate::Fleet) gives it its meaning). Every store implements it
/// in its own form (a table of its own on SQL, keys under the store's prefix elsewhere); the
/// conformance kit's `fleet` cases check it.
///
/// Times are the store's: an entry written with a time to live stops being live that long
/// after the store wrote it, whatever the writer's clock says, and an entry past its expiry is
/// never read and counts as absent. A store without a clock of its own to read (etcd) uses the
/// instances' clocks and says so in its documentation. Keys are at most [`MAX_BOARD_KEY_LEN`] bytes of text,
/// values at most [`MAX_BOARD_VALUE_LEN`].
#[async_trait]
pub trait Board: Send + Sync + fmt::Debug + 'static {
    /// The live entries whose key starts with `prefix`, in key order (bytewise).
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Jobs`) when the store fails.
    async fn board_read(&self, prefix: &str) -> Result<Vec<BoardEntry>, Error>;

    /// Writes `value` at `key` if `condition` holds, live for `ttl` from now (store clock) or,
    /// with `None`, until removed. Returns the entry's new version, larger than any version the
    /// key had, or `None` when the condition did not hold: nothing was written.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Jobs`) when the store fails; [`Error::InvalidConfig`] for
    /// a key or value over its limit.
    async fn board_write(
        &self,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>, Error>;

    /// Removes the entry at `key` if `condition` holds; true when a live entry was removed.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Jobs`) when the store fails.
    async fn board_remove(&self, key: &str, condition: BoardCondition) -> Result<bool, Error>;
}

#[async_trait]
impl<B: Board + ?Sized> Board for Arc<B> {
    async fn board_read(&self, prefix: &str) -> Result<Vec<BoardEntry>, Error> {
        (**self).board_read(prefix).await
    }
    async fn board_write(
        &self,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>, Error> {
        (**self).board_write(key, value, condition, ttl).await
    }
    async fn board_remove(&self, key: &str, condition: BoardCondition) -> Result<bool, Error> {
        (**self).board_remove(key, condition).await
    }
}

/// The checks every [`Board::board_write`] makes before it writes: key and value within their
/// limits and not empty.
///
/// # Errors
/// [`Error::InvalidConfig`] naming `key` or `value`.
pub fn validate_board_entry(key: &str, value: &str) -> Result<(), Error> {
    if key.is_empty() || key.len() > MAX_BOARD_KEY_LEN {
        return Err(Error::invalid_config(
            "key",
            format!(
                "a board key has 1 to {MAX_BOARD_KEY_LEN} bytes, this one {}",
                key.len()
            ),
        ));
    }
    if value.len() > MAX_BOARD_VALUE_LEN {
        return Err(Error::invalid_config(
            "value",
            format!(
                "a board value has at most {MAX_BOARD_VALUE_LEN} bytes, this one (at `{key}`) {}",
                value.len()
            ),
        ));
    }
    Ok(())
}
