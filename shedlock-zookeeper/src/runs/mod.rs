//! Run records ([`RunLog`]) as nodes beside the lock nodes:
//!
//! ```text
//! <root>/runs/<lock name>/<token>-<attempt>   one persistent node per run (attempt)
//! ```
//!
//! The lock name is encoded as for lock nodes; token and attempt are zero-padded (20 and 10
//! digits) so that the names of a lock's runs sort as its runs started. The node's data is the
//! rest of the record as JSON (job, tick, holder, outcome, error); its times are the node's:
//! `ctime` is the start and, once the run ended, `mtime` the end, both stamped by the
//! ensemble's leader, so no instance's clock enters.
//!
//! - **Start**: one `create`; a node that exists already is read back unchanged.
//! - **End**: one `setData` expecting version 0, the version a start creates: the first end
//!   moves the node to version 1, so every later end is refused by ZooKeeper itself (the first
//!   end stays). An end without a start (its write failed) creates the node ended, in one
//!   transaction that also moves it to version 1.
//! - **Retention**: every 32nd end a provider records trims that lock's runs to the newest
//!   [`runs_per_lock`](crate::ZkLockProviderBuilder::runs_per_lock) and deletes those started
//!   longer than [`run_retention`](crate::ZkLockProviderBuilder::run_retention) before the end
//!   just written (ensemble time).
//! - Nodes get the ACL of the provider's lock nodes; `<root>/runs` and a lock's directory are
//!   created on its first record.

mod stored;

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use shedlock_core::{
    Error, Operation, RunEnd, RunLog, RunQuery, RunRecord, RunStart, async_trait,
    validate_run_retention,
};
use zookeeper_client::{Client, MultiWriteError, MultiWriteResult, Stat};

use crate::ZkLockProvider;
use crate::error::ZkError;
use crate::paths::{decode_name, encode_name};
use stored::{decode, encode, node_name, parse_node_name};

/// Old records are deleted after every this many ends a provider records, not after each, so
/// that an end stays one request.
const TRIM_EVERY: u64 = 32;

/// Where a provider's run nodes live and what is kept of them.
#[derive(Debug)]
pub(crate) struct RunNodes {
    /// `<root>/runs`.
    dir: String,
    retention_ms: i64,
    per_lock: usize,
    ends: AtomicU64,
}

/// A run node whose data shedlock did not write.
#[derive(Debug, thiserror::Error)]
#[error(
    "run record {path} holds data shedlock did not write ({reason}); delete the node to drop the record"
)]
struct UnreadableRun {
    path: String,
    reason: String,
}

impl RunNodes {
    /// Checks the builder's run settings.
    pub(crate) fn new(root: &str, retention: Duration, per_lock: u32) -> Result<Self, Error> {
        validate_run_retention(retention, per_lock)?;
        Ok(RunNodes {
            dir: format!("{root}/runs"),
            retention_ms: i64::try_from(retention.as_millis()).unwrap_or(i64::MAX),
            per_lock: per_lock as usize,
            ends: AtomicU64::new(0),
        })
    }

    fn lock_dir(&self, lock: &str) -> String {
        format!("{}/{}", self.dir, encode_name(lock))
    }

    fn run_path(&self, start: &RunStart) -> String {
        format!("{}/{}", self.lock_dir(&start.lock), node_name(start))
    }
}

fn is(error: &ZkError, expected: &zookeeper_client::Error) -> bool {
    matches!(error, ZkError::Client(e) if std::mem::discriminant(e) == std::mem::discriminant(expected))
}

impl ZkLockProvider {
    /// The error for a failure at `path`; a missing parent means a missing schema.
    fn runs_error(&self, lock: &str, path: &str, error: ZkError) -> Error {
        if is(&error, &zookeeper_client::Error::NoNode) {
            return self.fail(Operation::Runs, lock, path, error);
        }
        error.at(path).into_store(Operation::Runs, lock)
    }

    /// Creates `<root>/runs` and the lock's directory if missing (never the root: a missing
    /// root is a missing schema).
    async fn make_run_dir(&self, client: &Client, lock: &str) -> Result<(), Error> {
        let options = self.session.access().persistent();
        for dir in [self.runs.dir.clone(), self.runs.lock_dir(lock)] {
            match self.session.timed(client.create(&dir, &[], &options)).await {
                Ok(_) => {}
                Err(error) if is(&error, &zookeeper_client::Error::NodeExists) => {}
                Err(error) => return Err(self.runs_error(lock, &dir, error)),
            }
        }
        Ok(())
    }

    /// The record of run node `path` (named `name`) of `lock`.
    fn run_record(
        &self,
        lock: &str,
        path: &str,
        name: &str,
        (data, stat): &(Vec<u8>, Stat),
    ) -> Result<RunRecord, Error> {
        decode(lock, name, data, stat).map_err(|reason| {
            let path = path.to_owned();
            Error::store(Operation::Runs, lock, UnreadableRun { path, reason })
        })
    }

    /// Creates `start`'s node ended with `end` (version 1, as an end leaves it): the `Stat`
    /// of the end, or `None` when the node exists.
    async fn create_ended(
        &self,
        client: &Client,
        path: &str,
        data: &[u8],
    ) -> Result<Option<Stat>, ZkError> {
        let options = self.session.access().persistent();
        let mut writer = client.new_multi_writer();
        writer.add_create(path, data, &options)?;
        writer.add_set_data(path, data, Some(0))?;
        match self.session.bounded(writer.commit()).await? {
            Ok(results) => match results.as_slice() {
                [_, MultiWriteResult::SetData { stat }] => Ok(Some(*stat)),
                other => Err(ZkError::Client(zookeeper_client::Error::UnexpectedError(
                    format!("unexpected transaction results {other:?}"),
                ))),
            },
            Err(MultiWriteError::OperationFailed {
                index: 0,
                source: zookeeper_client::Error::NodeExists,
            }) => Ok(None),
            Err(error) => Err(zookeeper_client::Error::from(error).into()),
        }
    }

    /// Deletes the runs of `lock` beyond the newest `runs_per_lock` and those started more
    /// than the retention before `now_ms` (ensemble time); oldest first, stopping at the first
    /// one young enough.
    async fn trim_runs(&self, client: &Client, lock: &str, now_ms: i64) -> Result<(), ZkError> {
        let dir = self.runs.lock_dir(lock);
        let mut names: Vec<String> = self.session.timed(client.list_children(&dir)).await?;
        names.retain(|name| parse_node_name(name).is_some());
        names.sort_unstable();
        let excess = names.len().saturating_sub(self.runs.per_lock);
        let mut doomed: Vec<String> = names.drain(..excess).collect();
        'aging: for batch in names.chunks(16) {
            let paths: Vec<String> = batch.iter().map(|name| format!("{dir}/{name}")).collect();
            let stats: Vec<_> = paths.iter().map(|path| client.check_stat(path)).collect();
            for (name, stat) in batch.iter().zip(stats) {
                match self.session.timed(stat).await? {
                    Some(stat) if stat.ctime < now_ms.saturating_sub(self.runs.retention_ms) => {
                        doomed.push(name.clone());
                    }
                    Some(_) => break 'aging,
                    None => {}
                }
            }
        }
        let paths: Vec<String> = doomed.iter().map(|name| format!("{dir}/{name}")).collect();
        let deletes: Vec<_> = paths.iter().map(|path| client.delete(path, None)).collect();
        for delete in deletes {
            match self.session.timed(delete).await {
                Ok(()) => {}
                Err(error) if is(&error, &zookeeper_client::Error::NoNode) => {}
                Err(error) => return Err(error),
            }
        }
        Ok(())
    }

    /// The records of `lock`, newest first by node name, at most `limit` when given.
    async fn lock_runs(
        &self,
        client: &Client,
        lock: &str,
        limit: Option<usize>,
    ) -> Result<Vec<RunRecord>, Error> {
        let dir = self.runs.lock_dir(lock);
        let mut names = match self.session.timed(client.list_children(&dir)).await {
            Ok(names) => names,
            Err(error) if is(&error, &zookeeper_client::Error::NoNode) => return Ok(Vec::new()),
            Err(error) => return Err(self.runs_error(lock, &dir, error)),
        };
        names.sort_unstable_by(|a, b| b.cmp(a));
        names.truncate(limit.unwrap_or(usize::MAX));
        // All reads leave at once; answers come back in order.
        let paths: Vec<String> = names.iter().map(|name| format!("{dir}/{name}")).collect();
        let reads: Vec<_> = paths.iter().map(|path| client.get_data(path)).collect();
        let mut records = Vec::with_capacity(names.len());
        for ((name, path), read) in names.iter().zip(&paths).zip(reads) {
            match self.session.timed(read).await {
                Ok(node) => records.push(self.run_record(lock, path, name, &node)?),
                // Trimmed since the listing.
                Err(error) if is(&error, &zookeeper_client::Error::NoNode) => {}
                Err(error) => return Err(self.runs_error(lock, path, error)),
            }
        }
        Ok(records)
    }
}

#[async_trait]
impl RunLog for ZkLockProvider {
    async fn run_started(&self, start: &RunStart) -> Result<RunRecord, Error> {
        let lock = &start.lock;
        let client = self.client(Operation::Runs, lock).await?;
        let path = self.runs.run_path(start);
        let data = encode(start, None);
        let options = self.session.access().persistent();
        for _ in 0..3 {
            match self
                .session
                .timed(client.create(&path, &data, &options))
                .await
            {
                Ok((stat, _)) => {
                    return self.run_record(lock, &path, &node_name(start), &(data, stat));
                }
                Err(error) if is(&error, &zookeeper_client::Error::NodeExists) => {
                    match self.session.timed(client.get_data(&path)).await {
                        Ok(node) => return self.run_record(lock, &path, &node_name(start), &node),
                        // Trimmed meanwhile: create it again.
                        Err(error) if is(&error, &zookeeper_client::Error::NoNode) => {}
                        Err(error) => return Err(self.runs_error(lock, &path, error)),
                    }
                }
                Err(error) if is(&error, &zookeeper_client::Error::NoNode) => {
                    self.make_run_dir(&client, lock).await?;
                }
                Err(error) => return Err(self.runs_error(lock, &path, error)),
            }
        }
        Err(self.runs_error(
            lock,
            &path,
            ZkError::Client(zookeeper_client::Error::NoNode),
        ))
    }

    async fn run_finished(&self, start: &RunStart, end: &RunEnd) -> Result<(), Error> {
        let lock = &start.lock;
        let client = self.client(Operation::Runs, lock).await?;
        let path = self.runs.run_path(start);
        let data = encode(start, Some(end));
        // Three tries: a start or a trim may come between the requests of an end.
        let ended_at = 'write: {
            for _ in 0..3 {
                match self
                    .session
                    .timed(client.set_data(&path, &data, Some(0)))
                    .await
                {
                    Ok(stat) => break 'write stat.mtime,
                    // Ended already: the first end stays.
                    Err(error) if is(&error, &zookeeper_client::Error::BadVersion) => {
                        return Ok(());
                    }
                    Err(error) if is(&error, &zookeeper_client::Error::NoNode) => {
                        match self.create_ended(&client, &path, &data).await {
                            Ok(Some(stat)) => break 'write stat.mtime,
                            // Started (or ended) meanwhile: end it as any other.
                            Ok(None) => {}
                            Err(error) if is(&error, &zookeeper_client::Error::NoNode) => {
                                self.make_run_dir(&client, lock).await?;
                            }
                            Err(error) => return Err(self.runs_error(lock, &path, error)),
                        }
                    }
                    Err(error) => return Err(self.runs_error(lock, &path, error)),
                }
            }
            let gave_up = "the node kept changing between the requests of the end";
            return Err(Error::store(Operation::Runs, lock, gave_up));
        };
        if self.runs.ends.fetch_add(1, Ordering::Relaxed) % TRIM_EVERY == TRIM_EVERY - 1 {
            // Housekeeping: a failure is logged, never the run's.
            if let Err(error) = self.trim_runs(&client, lock, ended_at).await {
                tracing::warn!(%error, lock = %lock, "deleting old run records failed");
            }
        }
        Ok(())
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        let lock_name = query.lock.as_deref().unwrap_or("*");
        let client = self.client(Operation::Runs, lock_name).await?;
        let locks = match &query.lock {
            Some(lock) => vec![lock.clone()],
            None => match self
                .session
                .timed(client.list_children(&self.runs.dir))
                .await
            {
                Ok(nodes) => nodes.iter().filter_map(|node| decode_name(node)).collect(),
                Err(error) if is(&error, &zookeeper_client::Error::NoNode) => Vec::new(),
                Err(error) => return Err(self.runs_error("*", &self.runs.dir, error)),
            },
        };
        // Names sort as runs started: the newest `limit` by name are the newest, unless a
        // `since` must look further.
        let limit = query.limit.filter(|_| query.since.is_none());
        let mut records = Vec::new();
        for lock in locks {
            records.extend(self.lock_runs(&client, &lock, limit).await?);
        }
        Ok(query.apply(records))
    }
}
