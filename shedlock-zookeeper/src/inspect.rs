//! [`LockInspector`]: the lock nodes read as [`LockRecord`]s on ensemble time, and an
//! operator's release, a compare-and-set on the node version the operator's read saw.

use std::time::{Duration, SystemTime};

use shedlock_core::{Error, LockInspector, LockQuery, LockRecord, Operation, async_trait};
use zookeeper_client::{Client, Stat};

use crate::ZkLockProvider;
use crate::error::ZkError;
use crate::names::decode_name;
use crate::provider::write::{Guard, Set};
use crate::record::{LeaseRecord, new_incarnation, system_time};

impl ZkLockProvider {
    /// Ensemble time now and lock node `name` (`None`: no node), read in one round trip: the
    /// node is read after the clock write, as ZooKeeper answers a session in order.
    async fn read_node(
        &self,
        client: &Client,
        operation: Operation,
        name: &str,
    ) -> Result<(i64, Option<(LeaseRecord, Stat)>), Error> {
        let path = self.paths.lock(name);
        let (clock, read) = tokio::join!(
            self.session
                .timed(client.set_data(&self.paths.clock, &[], None)),
            self.session.timed(client.get_data(&path)),
        );
        let now = clock
            .map_err(|e| self.fail(operation, name, &self.paths.clock, e))?
            .mtime;
        match read {
            Ok((data, stat)) => Ok((now, Some((self.decode(name, operation, &data)?, stat)))),
            Err(ZkError::Client(zookeeper_client::Error::NoNode)) => Ok((now, None)),
            Err(error) => Err(error.into_store(operation, name)),
        }
    }
}

/// The record of lock `name` from its node, read at ensemble time `now` (ms).
fn record(name: &str, lease: &LeaseRecord, stat: &Stat, now: i64) -> LockRecord {
    LockRecord::new(
        name,
        lease.holder.clone(),
        system_time(lease.locked_at_ms(stat)),
        system_time(lease.lock_until_ms(stat)),
        lease.token(stat),
        system_time(now),
    )
}

/// Reads the lock nodes under `<root>/locks` (nodes whose names shedlock did not encode are
/// left out); "now" is the `mtime` of a write to the clock node, so inspecting needs write
/// access to it, as locking does.
///
/// An operator's release writes the lease with no time left (`lock_until` = the write's
/// `mtime`), guarded by the node version the operator's read saw and the node's incarnation:
/// a lease taken or extended in between is read again and matched by holder and token. The
/// holder's own late release or extension then finds its lease ended and writes nothing.
#[async_trait]
impl LockInspector for ZkLockProvider {
    async fn lock_record(&self, name: &str) -> Result<Option<LockRecord>, Error> {
        let client = self.client(Operation::Read, name).await?;
        let (now, node) = self.read_node(&client, Operation::Read, name).await?;
        Ok(node.map(|(lease, stat)| record(name, &lease, &stat, now)))
    }

    async fn list_locks(&self, query: &LockQuery) -> Result<Vec<LockRecord>, Error> {
        let client = self.client(Operation::Read, "*").await?;
        let (clock, children) = tokio::join!(
            self.session
                .timed(client.set_data(&self.paths.clock, &[], None)),
            self.session.timed(client.list_children(&self.paths.locks)),
        );
        let now = clock
            .map_err(|e| self.fail(Operation::Read, "*", &self.paths.clock, e))?
            .mtime;
        let mut names: Vec<String> = children
            .map_err(|e| self.fail(Operation::Read, "*", &self.paths.locks, e))?
            .iter()
            .filter_map(|node| decode_name(node))
            .filter(|name| query.matches(name))
            .collect();
        names.sort_unstable();
        // Only the page's nodes are read (the names alone decide it), in batches whose reads
        // leave at once; answers come back in order. A node deleted since the listing is
        // replaced by the next name.
        let limit = query.limit.unwrap_or(usize::MAX);
        let mut records = Vec::with_capacity(names.len().min(limit));
        let mut rest = &names[..];
        while records.len() < limit && !rest.is_empty() {
            let (batch, after) = rest.split_at(rest.len().min(limit - records.len()).min(64));
            rest = after;
            let paths: Vec<String> = batch.iter().map(|name| self.paths.lock(name)).collect();
            let reads: Vec<_> = paths.iter().map(|path| client.get_data(path)).collect();
            for (name, read) in batch.iter().zip(reads) {
                match self.session.timed(read).await {
                    Ok((data, stat)) => {
                        let lease = self.decode(name, Operation::Read, &data)?;
                        records.push(record(name, &lease, &stat, now));
                    }
                    // Deleted since the listing.
                    Err(ZkError::Client(zookeeper_client::Error::NoNode)) => {}
                    Err(error) => return Err(error.into_store(Operation::Read, name)),
                }
            }
        }
        Ok(records)
    }

    async fn store_time(&self) -> Result<SystemTime, Error> {
        let client = self.client(Operation::Read, "*").await?;
        let stat = self
            .session
            .timed(client.set_data(&self.paths.clock, &[], None))
            .await
            .map_err(|e| self.fail(Operation::Read, "*", &self.paths.clock, e))?;
        Ok(system_time(stat.mtime))
    }

    async fn release_lock(&self, record: &LockRecord) -> Result<bool, Error> {
        let (name, holder, fencing_token) = (&*record.name, &*record.holder, record.fencing_token);
        let client = self.client(Operation::Release, name).await?;
        let path = self.paths.lock(name);
        // A second read when the node changed between the read and the write (its holder
        // extended the lease, say); a third change is reported as not released.
        for _ in 0..2 {
            let (now, node) = self.read_node(&client, Operation::Release, name).await?;
            let Some((lease, stat)) = node else {
                return Ok(false);
            };
            if lease.holder != holder
                || lease.token(&stat) != fencing_token
                || lease.lock_until_ms(&stat) <= now
            {
                return Ok(false);
            }
            let incarnation = lease.incarnation.clone().unwrap_or_else(new_incarnation);
            let guard = match lease.incarnation {
                Some(_) => Guard::Check(&incarnation),
                // Written by hand: this write gives it one, as an acquisition would.
                None => Guard::Adopt(&incarnation),
            };
            let ended = LeaseRecord::renewal(
                holder,
                fencing_token,
                system_time(lease.locked_at_ms(&stat)),
                Duration::ZERO,
                Duration::ZERO,
                &incarnation,
                lease.tick_ms,
            );
            match self
                .set_lock_node(&client, &path, &ended.encode(), stat.version, guard)
                .await
            {
                Ok(Set::Written(_)) => return Ok(true),
                Ok(Set::Changed | Set::IncarnationGone) => continue,
                Err(error) => return Err(error.into_store(Operation::Release, name)),
            }
        }
        Ok(false)
    }
}
