//! The fleet's board ([`Board`](shedlock_core::Board)) in Redis, beside the lock hashes and the
//! run records but under a prefix of its own.
//!
//! Under the board key prefix `B` (default `board:` followed by the key prefix, so
//! `board:shedlock:`), a board is three keys, sharing the hash tag `{board}` so that a Redis
//! Cluster keeps them in one slot (a prefix with a hash tag of its own, `app{x}:`, puts them
//! in that tag's slot instead):
//!
//! ```text
//! B{board}:entries   hash: key -> '<version>:<written_at ms>:<expires_at ms>:<value>'
//! B{board}:index     sorted set: every key, score 0 (read by ZRANGEBYLEX: bytewise order)
//! B{board}:version   string: the counter every write INCRs
//! ```
//!
//! `expires_at` is empty for an entry kept until removed. Times are the server's `TIME`, read
//! inside the scripts: a writer's clock plays no part. Versions come from the counter, so they
//! grow with every write of every key, also across a removal and a new write of the same key
//! (and a write takes its key's stored version + 1 should the counter have been lost).
//!
//! Each operation is one script, one round trip: a write or a removal reads the key's entry,
//! decides its condition on it (an entry past its expiry counts as absent and is deleted on
//! the way) and writes, atomically; a read takes the index's range of the prefix
//! (`ZRANGEBYLEX [<prefix> (<prefix>\xff`: UTF-8 text never holds the byte `0xff`), the
//! entries by `HMGET`, and deletes the expired ones it met. A read costs the entries under
//! its prefix, not the whole board.

mod majority;
mod single;

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use redis::Script;
use shedlock_core::{BoardCondition, BoardEntry, Error};

use crate::error::{ServerError, ServerErrorKind};
use crate::names::validate_prefix;
use crate::node::Node;
use crate::scripts::stored_number;
use crate::time::{millis, system_time};

static BOARD_READ: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../lua/board_entry.lua"),
        include_str!("../../lua/board_read.lua")
    ))
});

static BOARD_WRITE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../lua/board_entry.lua"),
        include_str!("../../lua/board_write.lua")
    ))
});

static BOARD_REMOVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../lua/board_entry.lua"),
        include_str!("../../lua/board_remove.lua")
    ))
});

/// The longest time to live a script is given, in ms (about 142,000 years): the server's
/// clock plus it stays below 2^53, exact in Lua's numbers. A longer one is kept this long.
const MAX_TTL_MS: u64 = 1 << 52;

/// Where a board lives.
#[derive(Debug, Clone)]
pub(crate) struct BoardKeys {
    prefix: Arc<str>,
}

impl BoardKeys {
    /// Validates the builder's board prefix against the (validated) lock key prefix and the
    /// runs prefix.
    pub(crate) fn new(
        key_prefix: &str,
        runs_prefix: &str,
        prefix: Option<String>,
    ) -> Result<Self, Error> {
        let rename = |error| match error {
            Error::InvalidConfig { message, .. } => {
                Error::invalid_config("board_key_prefix", message)
            }
            other => other,
        };
        let prefix: Arc<str> = match prefix {
            // Valid when the key prefix is (glob-free, no spaces), if maybe longer than 128.
            None => format!("board:{key_prefix}").into(),
            Some(prefix) => validate_prefix(prefix).map_err(rename)?,
        };
        for (other, what) in [
            (key_prefix, "the key prefix"),
            (runs_prefix, "the runs prefix"),
        ] {
            if prefix.starts_with(other) || other.starts_with(&*prefix) {
                return Err(Error::invalid_config(
                    "board_key_prefix",
                    format!(
                        "{prefix:?} and {what} {other:?} must not start with each other: the \
                         board would share keys with them"
                    ),
                ));
            }
        }
        Ok(BoardKeys { prefix })
    }

    /// The board's prefix.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    fn entries(&self) -> String {
        format!("{}{{board}}:entries", self.prefix)
    }

    fn index(&self) -> String {
        format!("{}{{board}}:index", self.prefix)
    }

    fn version(&self) -> String {
        format!("{}{{board}}:version", self.prefix)
    }
}

/// A condition as the scripts take it: its name and the version asked for.
fn condition_args(condition: BoardCondition) -> (&'static str, String) {
    match condition {
        BoardCondition::Always => ("always", String::new()),
        BoardCondition::Absent => ("absent", String::new()),
        BoardCondition::Version(version) => ("version", version.to_string()),
    }
}

/// An entry as the scripts store it: `<version>:<written_at>:<expires_at>:<value>`.
fn parse_entry(key: String, stored: &str) -> Option<BoardEntry> {
    let mut parts = stored.splitn(4, ':');
    let version = stored_number(parts.next()?)?;
    let written_at = system_time(stored_number(parts.next()?)?);
    let expires_at = match parts.next()? {
        "" => None,
        expires => Some(system_time(stored_number(expires)?)),
    };
    let value = parts.next()?;
    Some(BoardEntry::new(key, value, version, written_at, expires_at))
}

impl Node {
    fn board_invocation<'a>(
        &self,
        script: &'a Script,
        keys: &BoardKeys,
    ) -> redis::ScriptInvocation<'a> {
        let mut invocation = script.prepare_invoke();
        invocation
            .key(keys.entries())
            .key(keys.index())
            .key(keys.version());
        invocation
    }

    /// The live entries of the board whose key starts with `prefix`, in key order.
    pub(crate) async fn board_read(
        &self,
        keys: &BoardKeys,
        prefix: &str,
    ) -> Result<Vec<BoardEntry>, ServerError> {
        let mut invocation = self.board_invocation(&BOARD_READ, keys);
        invocation.arg(prefix);
        let entries = keys.entries();
        let reply: Vec<String> = self.run(Some(&entries), &invocation).await?;
        let mut read = Vec::with_capacity(reply.len() / 2);
        let mut pairs = reply.into_iter();
        while let (Some(key), Some(stored)) = (pairs.next(), pairs.next()) {
            let Some(entry) = parse_entry(key.clone(), &stored) else {
                return Err(ServerError::new(
                    self.server(),
                    Some(&entries),
                    ServerErrorKind::UnexpectedReply(format!(
                        "board entry {key:?} is not `<version>:<written_at>:<expires_at>:<value>`"
                    )),
                ));
            };
            read.push(entry);
        }
        Ok(read)
    }

    /// Writes `value` at `key` under `condition`: its new version, `None` when the condition
    /// did not hold.
    pub(crate) async fn board_write(
        &self,
        keys: &BoardKeys,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>, ServerError> {
        let (condition, version) = condition_args(condition);
        let ttl = ttl.map_or_else(String::new, |ttl| millis(ttl).min(MAX_TTL_MS).to_string());
        let mut invocation = self.board_invocation(&BOARD_WRITE, keys);
        invocation
            .arg(key)
            .arg(value)
            .arg(condition)
            .arg(version)
            .arg(ttl);
        let entries = keys.entries();
        let written: Option<String> = self.run(Some(&entries), &invocation).await?;
        written
            .map(|version| {
                stored_number(&version).ok_or_else(|| {
                    ServerError::new(
                        self.server(),
                        Some(&entries),
                        ServerErrorKind::UnexpectedReply(format!(
                            "the board's write replied version {version:?}"
                        )),
                    )
                })
            })
            .transpose()
    }

    /// Removes the live entry at `key` under `condition`: whether it was removed.
    pub(crate) async fn board_remove(
        &self,
        keys: &BoardKeys,
        key: &str,
        condition: BoardCondition,
    ) -> Result<bool, ServerError> {
        let (condition, version) = condition_args(condition);
        let mut invocation = self.board_invocation(&BOARD_REMOVE, keys);
        invocation.arg(key).arg(condition).arg(version);
        let entries = keys.entries();
        let removed: i64 = self.run(Some(&entries), &invocation).await?;
        Ok(removed == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn board_keys_share_a_slot_and_stay_apart() {
        let keys = BoardKeys::new("shedlock:", "runs:shedlock:", None).unwrap();
        assert_eq!(keys.entries(), "board:shedlock:{board}:entries");
        assert_eq!(keys.index(), "board:shedlock:{board}:index");
        assert_eq!(keys.version(), "board:shedlock:{board}:version");
        for bad in ["shedlock:board:", "runs:", "a b", "b*"] {
            let Err(Error::InvalidConfig { field, .. }) =
                BoardKeys::new("shedlock:", "runs:shedlock:", Some(bad.to_owned()))
            else {
                panic!("{bad:?} accepted");
            };
            assert_eq!(field, "board_key_prefix");
        }
    }

    #[test]
    fn entries_read_as_written() {
        let entry = parse_entry("k".into(), "7:1500:2500:a:b:c").unwrap();
        assert_eq!(
            (entry.version, entry.value.as_str()),
            (7, "a:b:c"),
            "a value keeps its colons"
        );
        assert_eq!(entry.written_at, system_time(1500));
        assert_eq!(entry.expires_at, Some(system_time(2500)));
        let kept = parse_entry("k".into(), "8:1500::").unwrap();
        assert_eq!((kept.expires_at, kept.value.as_str()), (None, ""));
        for bad in ["", "7", "7:1500", "7:1500:x:v", "x:1:2:v"] {
            assert!(parse_entry("k".into(), bad).is_none(), "{bad:?}");
        }
    }
}
