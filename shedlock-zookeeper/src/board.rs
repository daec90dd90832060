//! The fleet's board ([`Board`]) as nodes beside the locks:
//!
//! ```text
//! <root>/board          the board's directory (created on its first write); its data version
//!                       counts the entries created in it
//! <root>/board/<key>    one persistent node per entry, the key percent-encoded into one node
//!                       name (as lock names are); data: `{"ttl_ms":N}` or `{}`, a newline,
//!                       then the value as it was written
//! ```
//!
//! - **Times** are the ensemble's: an entry's `written_at` is its node's `mtime` (stamped by
//!   ZooKeeper's leader on the write), `expires_at` that `mtime` + the time to live (in whole
//!   milliseconds, rounded up). "Now", to tell live from expired, is the `mtime` of a write to
//!   `<root>/clock`, as everywhere in this crate; no instance's clock enters.
//! - **Versions** are the node's `mzxid`, the zxid of the write that last wrote it: it grows
//!   with every write, also across a removal and a new node at the same key.
//! - **Compare-and-set**: ZooKeeper compares only a node's own version number, which starts
//!   again at 0 when a node is deleted and created again. So every creation of an entry also
//!   writes the directory (one transaction: the directory's data version counts creations),
//!   and a write or removal under a condition is a transaction that checks both the
//!   directory's data version and the entry's version read just before (one round trip for
//!   "now", the directory and the node, pipelined; one for the transaction). An entry created
//!   meanwhile anywhere on the board makes the check fail: the node is read again, and the
//!   condition decided again on what it holds now.
//! - **Expiry**: an expired node is not read, counts as absent (a write wanting the key absent
//!   writes over it, under the same checks) and is deleted by the next read or removal that
//!   sees it. ZooKeeper cannot make a write depend on its time: an entry that expires between
//!   the read of a conditional write and its transaction is written as if still live (the
//!   gap is one round trip).
//! - **Writes whatever the key holds** (`BoardCondition::Always`): a `setData` and the
//!   creation (with the directory's write) sent together, in one round trip; ZooKeeper applies
//!   them in order, so the first writes when the node exists and the second when not.
//! - **Reads of a prefix**: "now" and the directory's children (their names; ZooKeeper bounds
//!   the reply by `jute.maxbuffer`, 1 MB by default: some 20,000 entries of the fleet's key
//!   lengths) in one round trip, then the matching nodes in `multiRead`s of [`READ_CHUNK`]
//!   nodes each (ZooKeeper 3.6 or later; before, one read per node), all sent at once.

use std::time::Duration;

use shedlock_core::{
    Board, BoardCondition, BoardEntry, Error, Operation, async_trait, validate_board_entry,
};
use zookeeper_client::{Client, MultiReadResult, MultiWriteError, MultiWriteResult, Stat};

use crate::ZkLockProvider;
use crate::error::ZkError;
use crate::names::decode_name;
use crate::record::{millis, system_time};

/// The most nodes one `multiRead` reads: with values of up to 16 KiB the reply stays well
/// below ZooKeeper's default message limit (`jute.maxbuffer`, 1 MiB).
const READ_CHUNK: usize = 32;

/// How often a conditional write or removal reads again after another write came between its
/// read and its transaction.
const TRIES: usize = 64;

/// A board node whose data shedlock did not write.
#[derive(Debug, thiserror::Error)]
#[error(
    "board entry {path} holds data shedlock did not write ({reason}); delete the node to drop the entry"
)]
struct UnreadableEntry {
    path: String,
    reason: String,
}

/// A conditional write or removal gave up after [`TRIES`] reads.
#[derive(Debug, thiserror::Error)]
#[error("the board kept changing between the read and the write of {path} ({TRIES} tries)")]
struct KeptChanging {
    path: String,
}

/// A board node as read.
struct Node {
    key: String,
    value: String,
    ttl_ms: Option<i64>,
    stat: Stat,
}

impl Node {
    fn expires_ms(&self) -> Option<i64> {
        self.ttl_ms.map(|ttl| self.stat.mtime.saturating_add(ttl))
    }

    fn live(&self, now: i64) -> bool {
        self.expires_ms().is_none_or(|expires| expires > now)
    }

    fn version(&self) -> u64 {
        version(&self.stat)
    }

    fn entry(self) -> BoardEntry {
        let expires_at = self.expires_ms().map(system_time);
        BoardEntry::new(
            self.key,
            self.value,
            version(&self.stat),
            system_time(self.stat.mtime),
            expires_at,
        )
    }
}

fn version(stat: &Stat) -> u64 {
    u64::try_from(stat.mzxid).unwrap_or_default()
}

/// A node's data: the header line, then the value.
fn encode(value: &str, ttl: Option<Duration>) -> Vec<u8> {
    let header = match ttl {
        Some(ttl) => format!("{{\"ttl_ms\":{}}}\n", millis(ttl)),
        None => "{}\n".to_owned(),
    };
    let mut data = header.into_bytes();
    data.extend_from_slice(value.as_bytes());
    data
}

#[derive(serde::Deserialize)]
struct Header {
    ttl_ms: Option<i64>,
}

/// The time to live and the value of a node's data.
fn decode(data: &[u8]) -> Result<(Option<i64>, String), String> {
    let text = std::str::from_utf8(data).map_err(|e| format!("not UTF-8: {e}"))?;
    let (header, value) = text.split_once('\n').ok_or("no header line")?;
    let header: Header = serde_json::from_str(header).map_err(|e| format!("header: {e}"))?;
    Ok((header.ttl_ms, value.to_owned()))
}

fn is(error: &ZkError, expected: &zookeeper_client::Error) -> bool {
    matches!(error, ZkError::Client(e) if std::mem::discriminant(e) == std::mem::discriminant(expected))
}

fn unexpected(what: String) -> ZkError {
    ZkError::Client(zookeeper_client::Error::UnexpectedError(what))
}

/// What a conditional write or removal reads first: "now", the directory's `Stat` (`None`: no
/// directory yet) and the node.
struct Look {
    now: i64,
    dir: Option<Stat>,
    node: Option<Node>,
}

/// How a creation ended.
enum Created {
    Version(u64),
    Exists,
    NoDirectory,
}

/// How a transaction under the directory's check ended.
enum Checked {
    Done(Vec<MultiWriteResult>),
    /// Another write came between the read and the transaction.
    Changed,
}

impl ZkLockProvider {
    fn board_error(&self, key: &str, path: &str, error: ZkError) -> Error {
        self.fail(Operation::Jobs, key, path, error)
    }

    fn board_node(&self, key: String, path: &str, data: &[u8], stat: Stat) -> Result<Node, Error> {
        let (ttl_ms, value) = decode(data).map_err(|reason| {
            let path = path.to_owned();
            Error::store(Operation::Jobs, &key, UnreadableEntry { path, reason })
        })?;
        Ok(Node {
            key,
            value,
            ttl_ms,
            stat,
        })
    }

    /// "Now", then the directory's `Stat`, then the node, in one round trip (ZooKeeper answers
    /// a session's requests in order: the node is read after the directory).
    async fn look(&self, client: &Client, key: &str, path: &str) -> Result<Look, Error> {
        let (clock, dir, node) = tokio::join!(
            self.session
                .timed(client.set_data(&self.paths.clock, &[], None)),
            self.session.timed(client.check_stat(&self.paths.board)),
            self.session.timed(client.get_data(path)),
        );
        let now = clock
            .map_err(|e| self.board_error(key, &self.paths.clock, e))?
            .mtime;
        let dir = dir.map_err(|e| self.board_error(key, &self.paths.board, e))?;
        let node = match node {
            Ok((data, stat)) => Some(self.board_node(key.to_owned(), path, &data, stat)?),
            Err(error) if is(&error, &zookeeper_client::Error::NoNode) => None,
            Err(error) => return Err(self.board_error(key, path, error)),
        };
        Ok(Look { now, dir, node })
    }

    /// Creates the board's directory if missing (never the root: a missing root is a missing
    /// schema).
    async fn make_board_dir(&self, client: &Client, key: &str) -> Result<(), Error> {
        let options = self.session.access().persistent();
        let dir = &self.paths.board;
        match self.session.timed(client.create(dir, &[], &options)).await {
            Ok(_) => Ok(()),
            Err(error) if is(&error, &zookeeper_client::Error::NodeExists) => Ok(()),
            Err(error) => Err(self.board_error(key, dir, error)),
        }
    }

    /// Sends the creation of the node at `path` with `data`, counted in the directory's data
    /// version in the same transaction.
    fn send_create<'c>(
        &self,
        client: &'c Client,
        key: &str,
        path: &str,
        data: &[u8],
    ) -> Result<impl std::future::Future<Output = Result<Created, Error>> + 'c, Error> {
        let options = self.session.access().persistent();
        let mut writer = client.new_multi_writer();
        let added = writer
            .add_create(path, data, &options)
            .and_then(|()| writer.add_set_data(&self.paths.board, &[], None));
        added.map_err(|e| self.board_error(key, path, e.into()))?;
        let committed = writer.commit();
        let (provider, key, path) = (self.clone(), key.to_owned(), path.to_owned());
        Ok(async move {
            let committed = provider.session.bounded(committed).await;
            match committed.map_err(|e| provider.board_error(&key, &path, e))? {
                // One transaction, one zxid: the directory's write has the node's `mzxid`.
                Ok(results) => match results.as_slice() {
                    [_, MultiWriteResult::SetData { stat }] => Ok(Created::Version(version(stat))),
                    other => {
                        let error = unexpected(format!("unexpected transaction results {other:?}"));
                        Err(provider.board_error(&key, &path, error))
                    }
                },
                Err(MultiWriteError::OperationFailed {
                    index: 0,
                    source: zookeeper_client::Error::NodeExists,
                }) => Ok(Created::Exists),
                Err(MultiWriteError::OperationFailed {
                    source: zookeeper_client::Error::NoNode,
                    ..
                }) => Ok(Created::NoDirectory),
                Err(error) => {
                    let error = ZkError::from(zookeeper_client::Error::from(error));
                    Err(provider.board_error(&key, &path, error))
                }
            }
        })
    }

    /// Creates the node at `path` with `data` (and the directory if missing): the new
    /// version, or `None` when the node exists.
    async fn create_entry(
        &self,
        client: &Client,
        key: &str,
        path: &str,
        data: &[u8],
    ) -> Result<Option<u64>, Error> {
        for _ in 0..2 {
            match self.send_create(client, key, path, data)?.await? {
                Created::Version(version) => return Ok(Some(version)),
                Created::Exists => return Ok(None),
                Created::NoDirectory => self.make_board_dir(client, key).await?,
            }
        }
        let error = ZkError::Client(zookeeper_client::Error::NoNode);
        Err(self.board_error(key, &self.paths.board, error))
    }

    /// Writes (`Some(data)`) or deletes (`None`) `node` at `path`, in one transaction that
    /// checks the directory's data version (`dir`) and the node's version as read.
    async fn checked(
        &self,
        client: &Client,
        path: &str,
        dir: &Stat,
        node: &Node,
        data: Option<&[u8]>,
    ) -> Result<Checked, Error> {
        let mut writer = client.new_multi_writer();
        let added = writer
            .add_check_version(&self.paths.board, dir.version)
            .and_then(|()| match data {
                Some(data) => writer.add_set_data(path, data, Some(node.stat.version)),
                None => writer.add_delete(path, Some(node.stat.version)),
            });
        added.map_err(|e| self.board_error(&node.key, path, e.into()))?;
        let committed = self.session.bounded(writer.commit()).await;
        match committed.map_err(|e| self.board_error(&node.key, path, e))? {
            Ok(results) => Ok(Checked::Done(results)),
            Err(MultiWriteError::OperationFailed {
                source: zookeeper_client::Error::BadVersion | zookeeper_client::Error::NoNode,
                ..
            }) => Ok(Checked::Changed),
            Err(error) => {
                let error = ZkError::from(zookeeper_client::Error::from(error));
                Err(self.board_error(&node.key, path, error))
            }
        }
    }

    /// Deletes the expired nodes of one read, best effort, in one transaction under the
    /// directory's check (a node created again meanwhile is left alone).
    async fn delete_expired(&self, client: &Client, dir: &Stat, expired: &[(String, i32)]) {
        let mut writer = client.new_multi_writer();
        let added = writer
            .add_check_version(&self.paths.board, dir.version)
            .and_then(|()| {
                expired
                    .iter()
                    .try_for_each(|(path, version)| writer.add_delete(path, Some(*version)))
            });
        if added.is_err() {
            return;
        }
        if let Ok(Err(error)) = self.session.bounded(writer.commit()).await {
            tracing::debug!(%error, "expired board entries left for a later read");
        }
    }

    /// The nodes named `names` (key, node name), read in `multiRead`s sent at once, or one
    /// read each on a server without `multiRead`. Nodes deleted meanwhile are left out.
    async fn read_board_nodes(
        &self,
        client: &Client,
        prefix: &str,
        names: &[(String, String)],
    ) -> Result<Vec<Node>, Error> {
        let path = |name: &str| format!("{}/{name}", self.paths.board);
        let fail = |e: ZkError| self.board_error(prefix, &self.paths.board, e);
        let mut sent = Vec::new();
        for chunk in names.chunks(READ_CHUNK) {
            let mut reader = client.new_multi_reader();
            for (_, name) in chunk {
                reader
                    .add_get_data(&path(name))
                    .map_err(|e| fail(e.into()))?;
            }
            sent.push(reader.commit());
        }
        let mut nodes = Vec::with_capacity(names.len());
        let mut chunks = names.chunks(READ_CHUNK);
        for read in sent {
            let chunk = chunks.next().unwrap_or_default();
            let results = match self.session.timed(read).await {
                Ok(results) if results.len() == chunk.len() => results,
                Ok(results) => {
                    let what = format!("{} results for {} reads", results.len(), chunk.len());
                    return Err(fail(unexpected(what)));
                }
                Err(error) if is(&error, &zookeeper_client::Error::Unimplemented) => {
                    return self.read_one_by_one(client, prefix, names).await;
                }
                Err(error) => return Err(fail(error)),
            };
            for ((key, name), result) in chunk.iter().zip(results) {
                match result {
                    MultiReadResult::Data { data, stat } => {
                        nodes.push(self.board_node(key.clone(), &path(name), &data, stat)?);
                    }
                    MultiReadResult::Error {
                        err: zookeeper_client::Error::NoNode,
                    } => {}
                    MultiReadResult::Error { err } => return Err(fail(err.into())),
                    other => return Err(fail(unexpected(format!("read result {other:?}")))),
                }
            }
        }
        Ok(nodes)
    }

    /// [`read_board_nodes`](Self::read_board_nodes) before ZooKeeper 3.6: one `getData` per
    /// node, all sent at once.
    async fn read_one_by_one(
        &self,
        client: &Client,
        prefix: &str,
        names: &[(String, String)],
    ) -> Result<Vec<Node>, Error> {
        let paths: Vec<String> = names
            .iter()
            .map(|(_, name)| format!("{}/{name}", self.paths.board))
            .collect();
        let sent: Vec<_> = paths.iter().map(|path| client.get_data(path)).collect();
        let mut nodes = Vec::with_capacity(names.len());
        for (((key, _), path), read) in names.iter().zip(&paths).zip(sent) {
            match self.session.timed(read).await {
                Ok((data, stat)) => nodes.push(self.board_node(key.clone(), path, &data, stat)?),
                Err(error) if is(&error, &zookeeper_client::Error::NoNode) => {}
                Err(error) => return Err(self.board_error(prefix, path, error)),
            }
        }
        Ok(nodes)
    }
}

/// The fleet's board as nodes under `<root>/board` (see the crate docs, "Fleet board").
#[async_trait]
impl Board for ZkLockProvider {
    async fn board_read(&self, prefix: &str) -> Result<Vec<BoardEntry>, Error> {
        let client = self.client(Operation::Jobs, prefix).await?;
        let (clock, children) = tokio::join!(
            self.session
                .timed(client.set_data(&self.paths.clock, &[], None)),
            self.session.timed(client.get_children(&self.paths.board)),
        );
        let now = clock
            .map_err(|e| self.board_error(prefix, &self.paths.clock, e))?
            .mtime;
        let (children, dir) = match children {
            Ok(children) => children,
            Err(error) if is(&error, &zookeeper_client::Error::NoNode) => return Ok(Vec::new()),
            Err(error) => return Err(self.board_error(prefix, &self.paths.board, error)),
        };
        let mut names: Vec<(String, String)> = children
            .into_iter()
            .filter_map(|name| {
                let key = decode_name(&name).filter(|key| key.starts_with(prefix))?;
                Some((key, name))
            })
            .collect();
        // Key order, bytewise (`String`'s order).
        names.sort_unstable();
        let nodes = self.read_board_nodes(&client, prefix, &names).await?;
        let (live, expired): (Vec<Node>, Vec<Node>) =
            nodes.into_iter().partition(|node| node.live(now));
        if !expired.is_empty() {
            let expired: Vec<(String, i32)> = expired
                .iter()
                .map(|node| (self.paths.board_entry(&node.key), node.stat.version))
                .collect();
            self.delete_expired(&client, &dir, &expired).await;
        }
        Ok(live.into_iter().map(Node::entry).collect())
    }

    async fn board_write(
        &self,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>, Error> {
        validate_board_entry(key, value)?;
        let client = self.client(Operation::Jobs, key).await?;
        let path = self.paths.board_entry(key);
        let data = encode(value, ttl);
        for _ in 0..TRIES {
            if condition == BoardCondition::Always {
                // Whatever the node holds: a write, and a creation in case there is none, sent
                // together (one round trip); ZooKeeper applies them in order, so exactly one
                // of them writes.
                let written = client.set_data(&path, &data, None);
                let created = self.send_create(&client, key, &path, &data)?;
                let (written, created) = tokio::join!(self.session.timed(written), created);
                match written {
                    Ok(stat) => return Ok(Some(version(&stat))),
                    Err(error) if is(&error, &zookeeper_client::Error::NoNode) => {}
                    Err(error) => return Err(self.board_error(key, &path, error)),
                }
                match created? {
                    Created::Version(version) => return Ok(Some(version)),
                    // Created by another writer in between: write over it.
                    Created::Exists => continue,
                    Created::NoDirectory => {
                        self.make_board_dir(&client, key).await?;
                        continue;
                    }
                }
            }
            let Look { now, dir, node } = self.look(&client, key, &path).await?;
            let node = match (node, condition) {
                (None, BoardCondition::Absent) => {
                    match self.create_entry(&client, key, &path, &data).await? {
                        Some(version) => return Ok(Some(version)),
                        None => continue,
                    }
                }
                (None, _) => return Ok(None),
                (Some(node), BoardCondition::Absent) if !node.live(now) => node,
                (Some(node), BoardCondition::Version(version))
                    if node.live(now) && node.version() == version =>
                {
                    node
                }
                (Some(_), _) => return Ok(None),
            };
            let Some(dir) = dir else { continue };
            match self
                .checked(&client, &path, &dir, &node, Some(&data))
                .await?
            {
                Checked::Done(results) => match results.as_slice() {
                    [MultiWriteResult::Check, MultiWriteResult::SetData { stat }] => {
                        return Ok(Some(version(stat)));
                    }
                    other => {
                        let error = unexpected(format!("unexpected transaction results {other:?}"));
                        return Err(self.board_error(key, &path, error));
                    }
                },
                Checked::Changed => {}
            }
        }
        Err(Error::store(Operation::Jobs, key, KeptChanging { path }))
    }

    async fn board_remove(&self, key: &str, condition: BoardCondition) -> Result<bool, Error> {
        let client = self.client(Operation::Jobs, key).await?;
        let path = self.paths.board_entry(key);
        for _ in 0..TRIES {
            let Look { now, dir, node } = self.look(&client, key, &path).await?;
            let (Some(node), Some(dir)) = (node, dir) else {
                return Ok(false);
            };
            let live = node.live(now);
            let holds = match condition {
                BoardCondition::Always => true,
                BoardCondition::Absent => false,
                BoardCondition::Version(version) => node.version() == version,
            };
            if live && !holds {
                return Ok(false);
            }
            // A live entry the condition holds for, or an expired one: absent for everyone
            // already, it goes too.
            match self.checked(&client, &path, &dir, &node, None).await? {
                Checked::Done(_) => return Ok(live),
                Checked::Changed => {}
            }
        }
        Err(Error::store(Operation::Jobs, key, KeptChanging { path }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_round_trips_with_and_without_a_time_to_live() {
        let value = "{\"a\": 1}\nsecond line é";
        let data = encode(value, Some(Duration::from_micros(1500)));
        assert_eq!(decode(&data), Ok((Some(2), value.to_owned())));
        assert_eq!(decode(&encode("", None)), Ok((None, String::new())));
        assert!(decode(b"no header").is_err());
        assert!(decode(b"\"text\"\nvalue").is_err());
    }
}
