//! Run records ([`RunLog`]) as nodes beside the lock nodes:
//!
//! ```text
//! <root>/runs/<lock name>                     a lock's directory; its data: the oldest start
//!                                             it may still hold (ms), for the age sweep
//! <root>/runs/<lock name>/<token>-<attempt>   one persistent node per run (attempt)
//! ```
//!
//! The lock name is encoded as for lock nodes; token and attempt are zero-padded (20 and 10
//! digits) so that the names of a lock's runs sort as the lock granted them, which is the order
//! they started in: a lock's newest runs are found from its children's names alone, and only
//! the nodes of the page asked for are read (`read`). The node's data is the rest of the record
//! as JSON (job, tick, holder, outcome, error, heartbeat); its times are the node's: `ctime` is
//! the start and, once the run ended, `mtime` the end, both stamped by the ensemble's leader,
//! so no instance's clock enters.
//!
//! - **Start**: one `create` (with the lock directory's `Stat` in the same round trip); a node
//!   that exists already is read back unchanged.
//! - **End**: one `setData` expecting version 0, the version a start creates (with the
//!   directory's `Stat` in the same round trip). A run whose heartbeat was renewed has a later
//!   version: its node is read, and written over the version read while it still runs. The
//!   first end stays: once ended, a node is never written again. An end without a start (its
//!   write failed) creates the node ended, in one transaction that also moves it to version 1.
//! - **Heartbeat** ([`RunLog::run_alive`]): a start under a heartbeat writes `alive_for` (the
//!   run goes on until `ctime` + `alive_for`), a renewal `alive_until` = now + the lease.
//!   "Now" is read as everywhere in this crate, from a write to `<root>/clock` (pipelined with
//!   the node's read), so it is never later than the renewal's own write. A renewal is a
//!   `setData` on the version read, made only while the node runs and its heartbeat has not
//!   passed; an end or another renewal in between makes it read again. ZooKeeper cannot make
//!   a write depend on its time: a renewal that reaches the ensemble after the heartbeat it
//!   read passed (the request took that long) puts the heartbeat back as it was and reports
//!   the run as not alive, so a heartbeat another instance saw pass reads, one round trip
//!   later, as it saw it.
//! - **Retention** (`trim`): by count, per lock, from the directory's `Stat` every start and
//!   end reads anyway; by age, every [`RUN_TRIM_SLACK`] ends a provider records, a sweep over
//!   the directories' data (one small read per lock).
//! - Nodes get the ACL of the provider's lock nodes; `<root>/runs` and a lock's directory are
//!   created on its first record, and a directory is deleted once the age sweep emptied it.

mod read;
mod stored;
mod trim;

use std::sync::atomic::AtomicU64;
use std::time::Duration;

use shedlock_core::{
    Error, Operation, RUN_TRIM_SLACK, RunEnd, RunLog, RunOutcome, RunQuery, RunRecord, RunStart,
    async_trait, validate_run_retention,
};
use zookeeper_client::{Client, MultiWriteError, MultiWriteResult, Stat};

use crate::ZkLockProvider;
use crate::error::ZkError;
use crate::names::encode_name;
use crate::record::{epoch_millis, millis};
use stored::{decode, encode, encode_renewal, node_name, start_of};

/// The most run records a provider may keep per lock: a lock's run node names are listed in one
/// reply, which ZooKeeper bounds by `jute.maxbuffer` (1 MB by default; a name takes 35 bytes).
pub(crate) const MAX_RUNS_PER_LOCK: u32 = 20_000;

/// Where a provider's run nodes live and what is kept of them.
#[derive(Debug)]
pub(crate) struct RunNodes {
    /// `<root>/runs`.
    dir: String,
    retention_ms: i64,
    per_lock: usize,
    /// Ends this provider (and its clones) recorded: every [`RUN_TRIM_SLACK`]th sweeps.
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
        if per_lock > MAX_RUNS_PER_LOCK {
            return Err(Error::invalid_config(
                "runs_per_lock",
                format!(
                    "at most {MAX_RUNS_PER_LOCK} on ZooKeeper: a lock's run records are listed in one reply, which the ensemble bounds (jute.maxbuffer, 1 MB by default)"
                ),
            ));
        }
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

    /// A lock directory holding this many nodes is trimmed to `per_lock`: half the slack, so
    /// that runs starting while it is trimmed stay within it.
    fn full_at(&self) -> usize {
        self.per_lock + (RUN_TRIM_SLACK / 2) as usize
    }
}

fn is(error: &ZkError, expected: &zookeeper_client::Error) -> bool {
    matches!(error, ZkError::Client(e) if std::mem::discriminant(e) == std::mem::discriminant(expected))
}

fn no_node(error: &ZkError) -> bool {
    is(error, &zookeeper_client::Error::NoNode)
}

impl ZkLockProvider {
    /// The error for a failure at `path`; a missing parent means a missing schema.
    fn runs_error(&self, lock: &str, path: &str, error: ZkError) -> Error {
        if no_node(&error) {
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

    /// Ends the node at `path`, which a start or a heartbeat moved past version 0: reads it and
    /// writes over the version read while it still runs. `Ok(None)`: ended already (the first
    /// end stays), or gone.
    async fn end_renewed(
        &self,
        client: &Client,
        lock: &str,
        path: &str,
        data: &[u8],
    ) -> Result<Option<Stat>, Error> {
        for _ in 0..5 {
            let (node, stat) = match self.session.timed(client.get_data(path)).await {
                Ok(node) => node,
                Err(error) if no_node(&error) => return Ok(None),
                Err(error) => return Err(self.runs_error(lock, path, error)),
            };
            let name = path.rsplit('/').next().unwrap_or_default();
            let record = self.run_record(lock, path, name, &(node, stat))?;
            if record.outcome != RunOutcome::Running {
                return Ok(None);
            }
            match self
                .session
                .timed(client.set_data(path, data, Some(stat.version)))
                .await
            {
                Ok(stat) => return Ok(Some(stat)),
                // Renewed or ended meanwhile: read again.
                Err(error) if is(&error, &zookeeper_client::Error::BadVersion) => {}
                Err(error) if no_node(&error) => return Ok(None),
                Err(error) => return Err(self.runs_error(lock, path, error)),
            }
        }
        let gave_up = "the node kept changing between the requests of the end";
        Err(Error::store(Operation::Runs, lock, gave_up))
    }
}

#[async_trait]
impl RunLog for ZkLockProvider {
    async fn run_started(&self, start: &RunStart) -> Result<RunRecord, Error> {
        let lock = &start.lock;
        let client = self.client(Operation::Runs, lock).await?;
        let (path, dir) = (self.runs.run_path(start), self.runs.lock_dir(lock));
        let data = encode(start, None);
        let options = self.session.access().persistent();
        for _ in 0..3 {
            // The directory's `Stat` (how many runs it holds) in the same round trip.
            let (created, counted) = tokio::join!(
                self.session.timed(client.create(&path, &data, &options)),
                self.session.timed(client.check_stat(&dir)),
            );
            match created {
                Ok((stat, _)) => {
                    let record = self.run_record(lock, &path, &node_name(start), &(data, stat))?;
                    self.trim_if_full(&client, lock, counted, stat.ctime).await;
                    return Ok(record);
                }
                Err(error) if is(&error, &zookeeper_client::Error::NodeExists) => {
                    match self.session.timed(client.get_data(&path)).await {
                        Ok(node) => return self.run_record(lock, &path, &node_name(start), &node),
                        // Trimmed meanwhile: create it again.
                        Err(error) if no_node(&error) => {}
                        Err(error) => return Err(self.runs_error(lock, &path, error)),
                    }
                }
                Err(error) if no_node(&error) => {
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
        let (path, dir) = (self.runs.run_path(start), self.runs.lock_dir(lock));
        let data = encode(start, Some(end));
        // Three tries: a start or a trim may come between the requests of an end.
        let (ended, counted) = 'write: {
            for _ in 0..3 {
                let (written, counted) = tokio::join!(
                    self.session.timed(client.set_data(&path, &data, Some(0))),
                    self.session.timed(client.check_stat(&dir)),
                );
                match written {
                    Ok(stat) => break 'write (stat, counted),
                    // Ended already, or renewed by its heartbeat: it decides.
                    Err(error) if is(&error, &zookeeper_client::Error::BadVersion) => {
                        match self.end_renewed(&client, lock, &path, &data).await? {
                            Some(stat) => break 'write (stat, counted),
                            // The first end stays.
                            None => return Ok(()),
                        }
                    }
                    Err(error) if no_node(&error) => {
                        match self.create_ended(&client, &path, &data).await {
                            Ok(Some(stat)) => break 'write (stat, counted),
                            // Started (or ended) meanwhile: end it as any other.
                            Ok(None) => {}
                            Err(error) if no_node(&error) => {
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
        self.trim_if_full(&client, lock, counted, ended.mtime).await;
        self.sweep_now_and_then(&client, ended.mtime).await;
        Ok(())
    }

    async fn run_alive(&self, start: &RunStart, lease: Duration) -> Result<bool, Error> {
        let lock = &start.lock;
        let client = self.client(Operation::Runs, lock).await?;
        let path = self.runs.run_path(start);
        for _ in 0..3 {
            // Ensemble time, then the node, in one round trip: ZooKeeper answers a session in
            // order, so the node is read after "now" was taken.
            let (clock, read) = tokio::join!(
                self.session
                    .timed(client.set_data(&self.paths.clock, &[], None)),
                self.session.timed(client.get_data(&path)),
            );
            let now = clock
                .map_err(|e| self.fail(Operation::Runs, lock, &self.paths.clock, e))?
                .mtime;
            let node = match read {
                Ok(node) => node,
                Err(error) if no_node(&error) => return Ok(false),
                Err(error) => return Err(self.runs_error(lock, &path, error)),
            };
            let version = node.1.version;
            let record = self.run_record(lock, &path, &node_name(start), &node)?;
            let until = record.alive_until.map(epoch_millis);
            if record.outcome != RunOutcome::Running || until.is_some_and(|until| until <= now) {
                return Ok(false);
            }
            // What the start wrote, alive until a lease after "now" (read before this write,
            // so never later than the write's time + the lease).
            let renewed = encode_renewal(&start_of(&record), now.saturating_add(millis(lease)));
            match self
                .session
                .timed(client.set_data(&path, &renewed, Some(version)))
                .await
            {
                // Written after the heartbeat passed (the request took that long): the run may
                // be rerun already, so the heartbeat is put back as it was, and the run stops.
                Ok(written) if until.is_some_and(|until| written.mtime >= until) => {
                    let until = until.unwrap_or_default();
                    let restored = encode_renewal(&start_of(&record), until);
                    let put_back = client.set_data(&path, &restored, Some(written.version));
                    if let Err(error) = self.session.timed(put_back).await {
                        // Ended (or deleted) meanwhile: it is not alive either way.
                        tracing::debug!(%error, lock = %lock, "run heartbeat not put back");
                    }
                    return Ok(false);
                }
                Ok(_) => return Ok(true),
                // Ended or renewed meanwhile: read again.
                Err(error) if is(&error, &zookeeper_client::Error::BadVersion) => {}
                Err(error) if no_node(&error) => return Ok(false),
                Err(error) => return Err(self.runs_error(lock, &path, error)),
            }
        }
        let gave_up = "the node kept changing between the requests of the heartbeat";
        Err(Error::store(Operation::Runs, lock, gave_up))
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        self.read_runs(query).await
    }
}
