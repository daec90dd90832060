//! [`LockInspector`] on one server: a lock's hash read as a [`LockRecord`], on the server's
//! clock. (RedLock's majority view is in `redlock::inspect`.)

use std::time::SystemTime;

use shedlock_core::{Error, LockInspector, LockQuery, LockRecord, Operation, async_trait};

use crate::RedisLockProvider;
use crate::error::store_error;
use crate::node::StateParts;
use crate::time::system_time;

/// The record of lock `name` from its hash's fields, read at the server's `now`.
pub(crate) fn record(
    name: &str,
    (holder, token, locked_at, lock_until, now): StateParts,
) -> LockRecord {
    LockRecord::new(
        name,
        holder,
        system_time(locked_at),
        system_time(lock_until),
        token,
        system_time(now),
    )
}

/// The lock names among `keys` (all under `prefix`) that `query` asks for, in name order.
pub(crate) fn names_in(keys: Vec<String>, prefix: &str, query: &LockQuery) -> Vec<String> {
    let mut names: Vec<String> = keys
        .into_iter()
        .filter_map(|key| key.strip_prefix(prefix).map(str::to_owned))
        .filter(|name| query.matches(name))
        .collect();
    names.sort_unstable();
    names.dedup();
    names
}

/// The records of `names` (in name order) up to the query's limit, read one by one; a name
/// whose lock is gone since it was listed is skipped.
pub(crate) async fn records_of(
    inspector: &dyn LockInspector,
    names: Vec<String>,
    query: &LockQuery,
) -> Result<Vec<LockRecord>, Error> {
    let mut records = Vec::new();
    for name in names {
        if query.limit.is_some_and(|limit| records.len() >= limit) {
            break;
        }
        if let Some(record) = inspector.lock_record(&name).await? {
            records.push(record);
        }
    }
    Ok(records)
}

/// What `INFO replication` says of the server a [`RedisLockProvider`] uses (through Sentinel:
/// of the master), from [`RedisLockProvider::replication`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Replication {
    /// `master`, or `slave` for a replica.
    pub role: String,
    /// How many replicas are connected to it.
    pub connected_replicas: u32,
}

impl RedisLockProvider {
    /// The server's role and connected replicas (`INFO replication`; on a cluster, of any one
    /// node: see [`cluster_shards`](Self::cluster_shards)). A master with replicas
    /// answers grants before they reach them, so a failover can lose the last grant unless
    /// [`wait_for_replicas`](crate::RedisLockProviderBuilder::wait_for_replicas).
    ///
    /// # Errors
    /// [`Error::Store`](shedlock_core::Error::Store) when the server does not answer, or
    /// refuses `INFO` (as some managed services do).
    pub async fn replication(&self) -> Result<Replication, Error> {
        let (role, connected_replicas) = self
            .node
            .replication()
            .await
            .map_err(|e| store_error(Operation::Read, "*", e))?;
        Ok(Replication {
            role,
            connected_replicas,
        })
    }
}

/// One shard of a Redis Cluster, from [`RedisLockProvider::cluster_shards`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClusterShard {
    /// The master, `host:port`.
    pub master: String,
    /// Its replicas, `host:port`.
    pub replicas: Vec<String>,
    /// How many of the 16384 hash slots it serves.
    pub slots: u32,
}

impl RedisLockProvider {
    /// On a Redis Cluster, its shards (`CLUSTER SLOTS`, asked of any node): each master, its
    /// replicas and its slots, in slot order; `None` on one server or through Sentinel.
    ///
    /// # Errors
    /// [`Error::Store`](shedlock_core::Error::Store) when no node answers.
    pub async fn cluster_shards(&self) -> Option<Result<Vec<ClusterShard>, Error>> {
        let shards = self.node.cluster_shards().await?;
        Some(
            shards
                .map(|shards| {
                    shards
                        .into_iter()
                        .map(|(master, replicas, slots)| ClusterShard {
                            master,
                            replicas,
                            slots,
                        })
                        .collect()
                })
                .map_err(|e| store_error(Operation::Read, "*", e)),
        )
    }
}

/// Reads the hashes under the key prefix (`SCAN`, then one script per lock, on the server's
/// clock). An operator's release ends the lease as its holder's release would without
/// `lock_at_least_for`: `lock_until` becomes the server's now, so the holder's own late
/// release or extension finds the lease over and changes nothing.
#[async_trait]
impl LockInspector for RedisLockProvider {
    async fn lock_record(&self, name: &str) -> Result<Option<LockRecord>, Error> {
        let parts = self
            .node
            .state(&self.key(name))
            .await
            .map_err(|e| store_error(Operation::Read, name, e))?;
        Ok(parts.map(|parts| record(name, parts)))
    }

    async fn list_locks(&self, query: &LockQuery) -> Result<Vec<LockRecord>, Error> {
        let prefix = self.key_prefix();
        let keys = self
            .node
            .keys(&format!("{prefix}*"))
            .await
            .map_err(|e| store_error(Operation::Read, "*", e))?;
        let names = if self.node.is_cluster() {
            let mut names: Vec<String> = keys
                .iter()
                .filter_map(|key| crate::cluster::lock_name(key, prefix))
                .filter(|name| query.matches(name))
                .map(str::to_owned)
                .collect();
            names.sort_unstable();
            names.dedup();
            names
        } else {
            names_in(keys, prefix, query)
        };
        records_of(self, names, query).await
    }

    async fn store_time(&self) -> Result<SystemTime, Error> {
        let now = self
            .node
            .time()
            .await
            .map_err(|e| store_error(Operation::Read, "*", e))?;
        Ok(system_time(now))
    }

    async fn release_lock(&self, record: &LockRecord) -> Result<bool, Error> {
        let (name, holder, fencing_token) = (&*record.name, &*record.holder, record.fencing_token);
        self.node
            .release(
                &self.key(name),
                holder,
                fencing_token,
                0,
                &self.settings.channel,
                name,
            )
            .await
            .map_err(|e| store_error(Operation::Release, name, e))
    }
}
