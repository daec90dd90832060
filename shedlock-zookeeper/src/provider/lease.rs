//! The `LockProvider` operations: acquire, release, extend.

use std::sync::Arc;
use std::time::Duration;

use shedlock_core::{
    Error, LockConfiguration, LockInspector, LockLease, LockProvider, Operation, async_trait,
};
use zookeeper_client::{Client, Stat};

use super::ZkLockProvider;
use super::own::{OwnWrite, OwnWrites};
use super::write::{Guard, Set};
use crate::error::ZkError;
use crate::record::{LeaseRecord, epoch_millis, millis, system_time};

impl ZkLockProvider {
    pub(super) fn remember(
        &self,
        lease: &LockLease,
        stat: &Stat,
        incarnation: Arc<str>,
        tick_ms: Option<i64>,
        now_ms: i64,
    ) {
        let write = OwnWrite {
            token: lease.fencing_token(),
            version: stat.version,
            lock_until_ms: epoch_millis(lease.lock_until()),
            incarnation,
            tick_ms,
        };
        self.own_writes().insert(lease.name(), write, now_ms);
    }

    fn own_writes(&self) -> std::sync::MutexGuard<'_, OwnWrites> {
        self.own.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn forget(&self, lease: &LockLease) {
        self.own_writes()
            .remove(lease.name(), lease.fencing_token());
    }

    /// Reads the lock node: what a write over it needs if it still holds `lease` for this
    /// holder (same token), `None` otherwise. A lease its last write ended (a release without
    /// time left, an operator's release) is no longer anyone's: writing over it again (a late
    /// release with `lock_at_least_for`) would take the lock back.
    async fn current(
        &self,
        client: &Client,
        lease: &LockLease,
        operation: Operation,
    ) -> Result<Option<OwnWrite>, Error> {
        let path = self.paths.lock(lease.name());
        match self.session.timed(client.get_data(&path)).await {
            Ok((data, stat)) => {
                let record = self.decode(lease.name(), operation, &data)?;
                let ours = record.holder == *self.holder
                    && record.token(&stat) == lease.fencing_token()
                    && record.lock_until_ms(&stat) > stat.mtime;
                // A lease of this holder always names its incarnation; one without was
                // written by hand, and is not touched.
                Ok(record
                    .incarnation
                    .clone()
                    .filter(|_| ours)
                    .map(|incarnation| OwnWrite {
                        token: lease.fencing_token(),
                        version: stat.version,
                        lock_until_ms: record.lock_until_ms(&stat),
                        incarnation: incarnation.into(),
                        tick_ms: record.tick_ms,
                    }))
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

    /// Writes `record(incarnation, last tick)` over `lease` (release or extension): over the
    /// version this provider last wrote first, then once more after reading the node if
    /// someone else wrote it since. `Ok(None)`: the lease is no longer this holder's, or
    /// `check` refused its current end; otherwise the write's `Stat` and what it wrote over.
    async fn overwrite(
        &self,
        client: &Client,
        lease: &LockLease,
        record: impl Fn(&str, Option<i64>) -> LeaseRecord,
        operation: Operation,
        check: impl Fn(i64) -> bool,
    ) -> Result<Option<(Stat, OwnWrite)>, Error> {
        if lease.holder() != &*self.holder {
            return Ok(None);
        }
        let path = self.paths.lock(lease.name());
        let mut known = self
            .own_writes()
            .get(lease.name(), lease.fencing_token())
            .cloned();
        for _ in 0..2 {
            let write = match known.take() {
                Some(known) => known,
                None => match self.current(client, lease, operation).await? {
                    Some(current) => current,
                    None => break,
                },
            };
            if !check(write.lock_until_ms) {
                break;
            }
            let data = record(&write.incarnation, write.tick_ms).encode();
            let guard = Guard::Check(&write.incarnation);
            match self
                .set_lock_node(client, &path, &data, write.version, guard)
                .await
            {
                Ok(Set::Written(stat)) => return Ok(Some((stat, write))),
                // Another incarnation or another write: the read decides.
                Ok(Set::Changed | Set::IncarnationGone) => continue,
                Err(error) => return Err(error.into_store(operation, lease.name())),
            }
        }
        self.forget(lease);
        Ok(None)
    }

    /// After a write refused because the incarnation child of the node read at `read` is
    /// missing: `Ok(None)` if the node was deleted or created again since (someone else's
    /// doing), an error if that same node lost its child (deleted by hand).
    pub(super) async fn incarnation_gone(
        &self,
        client: &Client,
        name: &str,
        read: &Stat,
    ) -> Result<Option<LockLease>, Error> {
        let path = self.paths.lock(name);
        match self.session.timed(client.check_stat(&path)).await {
            Ok(Some(stat)) if stat.czxid == read.czxid => Err(ZkError::Unreadable {
                path,
                reason: "the child node named by its `incarnation` is missing".to_owned(),
            }
            .into_store(Operation::Acquire, name)),
            Ok(_) => Ok(None),
            Err(error) => Err(error.into_store(Operation::Acquire, name)),
        }
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
        let Some(claim) = self.claim(config, read, now)? else {
            return Ok(None);
        };
        let outcome = self.commit(&client, claim.write()).await;
        self.settle(&client, config, claim, outcome, now).await
    }

    async fn acquire_many(
        &self,
        configs: &[LockConfiguration],
    ) -> Vec<Result<Option<LockLease>, Error>> {
        self.acquire_batch(configs).await
    }

    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        let client = self.client(Operation::Release, lease.name()).await?;
        let record = |incarnation: &str, tick_ms| {
            LeaseRecord::renewal(
                &self.holder,
                lease.fencing_token(),
                lease.locked_at(),
                Duration::ZERO,
                lease.lock_at_least_for(),
                incarnation,
                tick_ms,
            )
        };
        let written = self
            .overwrite(&client, lease, record, Operation::Release, |_| true)
            .await?;
        self.forget(lease);
        // Written over an expired lease nobody took: harmless (the lock stays free), but the
        // lease was no longer this holder's.
        Ok(written.is_some_and(|(stat, over)| stat.mtime < over.lock_until_ms))
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
        let record = |incarnation: &str, tick_ms| {
            LeaseRecord::renewal(
                &self.holder,
                lease.fencing_token(),
                lease.locked_at(),
                lock_at_most_for,
                Duration::ZERO,
                incarnation,
                tick_ms,
            )
        };
        let written = self
            .overwrite(&client, lease, record, Operation::Extend, |lock_until_ms| {
                lock_until_ms > now
            })
            .await?;
        let Some((stat, over)) = written else {
            return Ok(None);
        };
        let lock_until_ms = stat.mtime.saturating_add(millis(lock_at_most_for));
        let extended = lease.extended(
            system_time(lock_until_ms),
            lock_at_most_for,
            lock_at_least_for,
        );
        self.remember(&extended, &stat, over.incarnation, over.tick_ms, now);
        Ok(Some(extended))
    }

    fn run_log(&self) -> Option<&dyn shedlock_core::RunLog> {
        Some(self)
    }

    fn holder(&self) -> &str {
        &self.holder
    }

    fn inspector(&self) -> Option<&dyn LockInspector> {
        Some(self)
    }

    fn board(&self) -> Option<&dyn shedlock_core::Board> {
        Some(self)
    }
}
