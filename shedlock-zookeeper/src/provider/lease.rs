//! The `LockProvider` operations: acquire, release, extend, and what they remember of their
//! own writes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use shedlock_core::{Error, LockConfiguration, LockLease, LockProvider, Operation, async_trait};
use zookeeper_client::{Acls, Client, CreateMode, Stat};

use super::ZkLockProvider;
use crate::error::ZkError;
use crate::record::{LeaseRecord, millis, system_time};

#[derive(Debug, Clone, Copy)]
pub(super) struct OwnWrite {
    token: u64,
    version: i32,
    lock_until_ms: i64,
}

/// What the lock node holds for a lease of this holder: its version and lease end.
type Current = Option<(i32, i64)>;

impl ZkLockProvider {
    fn remember(&self, lease: &LockLease, stat: &Stat, lock_until_ms: i64) {
        let write = OwnWrite {
            token: lease.fencing_token(),
            version: stat.version,
            lock_until_ms,
        };
        self.own_writes().insert(Arc::from(lease.name()), write);
    }

    fn own_writes(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, OwnWrite>> {
        self.own.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The version and lease end this provider last wrote for `lease`, if nobody wrote since
    /// as far as it knows.
    fn remembered(&self, lease: &LockLease) -> Current {
        self.own_writes()
            .get(lease.name())
            .filter(|w| w.token == lease.fencing_token())
            .map(|w| (w.version, w.lock_until_ms))
    }

    fn forget(&self, lease: &LockLease) {
        let mut own = self.own_writes();
        if own
            .get(lease.name())
            .is_some_and(|w| w.token == lease.fencing_token())
        {
            own.remove(lease.name());
        }
    }

    /// Reads the lock node: its version and lease end if it still holds `lease` for this
    /// holder (same token), `None` otherwise.
    async fn current(
        &self,
        client: &Client,
        lease: &LockLease,
        operation: Operation,
    ) -> Result<Current, Error> {
        let path = self.paths.lock(lease.name());
        match self.session.timed(client.get_data(&path)).await {
            Ok((data, stat)) => {
                let record = self.decode(lease.name(), operation, &data)?;
                let ours =
                    record.holder == *self.holder && record.token(&stat) == lease.fencing_token();
                Ok(ours.then(|| (stat.version, record.lock_until_ms(&stat))))
            }
            Err(ZkError::Client(zookeeper_client::Error::NoNode)) => Ok(None),
            Err(error) => Err(error.into_store(operation, lease.name())),
        }
    }

    /// Ensemble time now: the `mtime` of a write to the clock node.
    async fn now_ms(
        &self,
        client: &Client,
        operation: Operation,
        lock: &str,
    ) -> Result<i64, Error> {
        self.session
            .timed(client.set_data(&self.paths.clock, &[], None))
            .await
            .map(|stat| stat.mtime)
            .map_err(|e| self.fail(operation, lock, &self.paths.clock, e))
    }

    /// Writes `record` over `lease` (release or extension): the version this provider last
    /// wrote first, then once more after reading the node if someone else wrote it since.
    /// `Ok(None)`: the lease is no longer this holder's, or `check` refused its current end;
    /// otherwise the write's `Stat` and the lease end before the write.
    async fn overwrite(
        &self,
        client: &Client,
        lease: &LockLease,
        record: &LeaseRecord,
        operation: Operation,
        check: impl Fn(i64) -> bool,
    ) -> Result<Option<(Stat, i64)>, Error> {
        if lease.holder() != &*self.holder {
            return Ok(None);
        }
        let path = self.paths.lock(lease.name());
        let data = record.encode();
        let mut known = self.remembered(lease);
        for _ in 0..2 {
            let (version, lock_until_ms) = match known.take() {
                Some(known) => known,
                None => match self.current(client, lease, operation).await? {
                    Some(current) => current,
                    None => break,
                },
            };
            if !check(lock_until_ms) {
                break;
            }
            match self
                .session
                .timed(client.set_data(&path, &data, Some(version)))
                .await
            {
                Ok(stat) => return Ok(Some((stat, lock_until_ms))),
                Err(ZkError::Client(
                    zookeeper_client::Error::BadVersion | zookeeper_client::Error::NoNode,
                )) => continue,
                Err(error) => return Err(error.into_store(operation, lease.name())),
            }
        }
        self.forget(lease);
        Ok(None)
    }
}

#[async_trait]
impl LockProvider for ZkLockProvider {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        let name = config.name();
        let path = self.paths.lock(name);
        let client = self.client(Operation::Acquire, name).await?;
        // Both requests leave at once; ZooKeeper answers a session's requests in order, so
        // the node is read after "now" was taken: comparing with an earlier "now" can only
        // refuse a lock that just became free, never grant a held one.
        let (clock, read) = tokio::join!(
            self.session
                .timed(client.set_data(&self.paths.clock, &[], None)),
            self.session.timed(client.get_data(&path)),
        );
        let now = clock
            .map_err(|e| self.fail(Operation::Acquire, name, &self.paths.clock, e))?
            .mtime;
        let written = match read {
            Ok((current, stat)) => {
                let record = self.decode(name, Operation::Acquire, &current)?;
                let window = millis(config.acquired_within_window());
                if record.lock_until_ms(&stat) > now
                    || record.locked_at_ms(&stat).saturating_add(window) > now
                {
                    return Ok(None);
                }
                let token = record.token(&stat).checked_add(1).ok_or_else(|| {
                    ZkError::Unreadable {
                        path: path.clone(),
                        reason: "its token cannot grow any more".to_owned(),
                    }
                    .into_store(Operation::Acquire, name)
                })?;
                let data =
                    LeaseRecord::acquisition(&self.holder, config.lock_at_most_for(), Some(token))
                        .encode();
                match self
                    .session
                    .timed(client.set_data(&path, &data, Some(stat.version)))
                    .await
                {
                    // Deleted by hand since the read: this attempt simply did not get it.
                    Err(ZkError::Client(zookeeper_client::Error::NoNode)) => return Ok(None),
                    written => written.map(|stat| (stat, token)),
                }
            }
            Err(ZkError::Client(zookeeper_client::Error::NoNode)) => {
                let data = LeaseRecord::acquisition(&self.holder, config.lock_at_most_for(), None)
                    .encode();
                let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
                self.session
                    .timed(client.create(&path, &data, &persistent))
                    .await
                    .map(|(stat, _)| (stat, stat.czxid.max(0) as u64))
            }
            Err(error) => return Err(error.into_store(Operation::Acquire, name)),
        };
        let (stat, token) = match written {
            Ok(written) => written,
            // Someone else wrote first: they hold it now.
            Err(ZkError::Client(
                zookeeper_client::Error::BadVersion | zookeeper_client::Error::NodeExists,
            )) => return Ok(None),
            Err(error) => {
                return Err(self.fail(Operation::Acquire, name, &self.paths.locks, error));
            }
        };
        let lock_until_ms = stat.mtime.saturating_add(millis(config.lock_at_most_for()));
        let lease = LockLease::new(
            config,
            Arc::clone(&self.holder),
            token,
            system_time(stat.mtime),
            system_time(lock_until_ms),
        );
        self.remember(&lease, &stat, lock_until_ms);
        Ok(Some(lease))
    }

    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        let client = self.client(Operation::Release, lease.name()).await?;
        let record = LeaseRecord::renewal(
            &self.holder,
            lease.fencing_token(),
            lease.locked_at(),
            Duration::ZERO,
            lease.lock_at_least_for(),
        );
        let written = self
            .overwrite(&client, lease, &record, Operation::Release, |_| true)
            .await?;
        self.forget(lease);
        // Written over an expired lease nobody took: harmless (the lock stays free), but the
        // lease was no longer this holder's.
        Ok(written.is_some_and(|(stat, lock_until_ms)| stat.mtime < lock_until_ms))
    }

    async fn extend(
        &self,
        lease: &LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<LockLease>, Error> {
        let client = self.client(Operation::Extend, lease.name()).await?;
        let now = self
            .now_ms(&client, Operation::Extend, lease.name())
            .await?;
        let record = LeaseRecord::renewal(
            &self.holder,
            lease.fencing_token(),
            lease.locked_at(),
            lock_at_most_for,
            Duration::ZERO,
        );
        let written = self
            .overwrite(
                &client,
                lease,
                &record,
                Operation::Extend,
                |lock_until_ms| lock_until_ms > now,
            )
            .await?;
        let Some((stat, _)) = written else {
            return Ok(None);
        };
        let lock_until_ms = stat.mtime.saturating_add(millis(lock_at_most_for));
        let extended = lease.extended(
            system_time(lock_until_ms),
            lock_at_most_for,
            lock_at_least_for,
        );
        self.remember(&extended, &stat, lock_until_ms);
        Ok(Some(extended))
    }

    fn holder(&self) -> &str {
        &self.holder
    }
}
