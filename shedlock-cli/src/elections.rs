//! Elections as the dashboard reads them: an election run on a lock provider is a lock of the
//! election's name, but one run by etcd's or ZooKeeper's own elector (`EtcdElector`,
//! `ZkElector`) keeps its candidates under the store's elections keys or nodes, where no lock
//! read finds them. [`WithElector`] serves the dashboard a store whose lock read falls back to
//! the elector's leader, so `--election NAME` shows the leader however the election is run.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use shedlock_core::{
    Error, LockConfiguration, LockInspector, LockLease, LockProvider, LockQuery, LockRecord,
    RunLog, async_trait,
};

/// A store's own elector, as the dashboard reads it: the leader of an election. Implemented
/// in the module of each store that has one.
#[async_trait]
pub(crate) trait Leaders: Send + Sync + fmt::Debug {
    /// The leader of `election` as the elector records it.
    async fn leader(&self, election: &str) -> Result<Option<LockRecord>, Error>;
}

/// A provider whose [`LockInspector::lock_record`] answers, for a name whose lock is not held,
/// with the leader of the store elector's election of that name when there is one; every other
/// call goes to the provider.
#[derive(Clone, Debug)]
pub(crate) struct WithElector<P> {
    provider: P,
    elector: Arc<dyn Leaders>,
}

impl<P> WithElector<P> {
    pub(crate) fn new(provider: P, elector: Arc<dyn Leaders>) -> Self {
        WithElector { provider, elector }
    }
}

#[async_trait]
impl<P: LockProvider + LockInspector> LockProvider for WithElector<P> {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        self.provider.acquire(config).await
    }

    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        LockProvider::release(&self.provider, lease).await
    }

    async fn extend(
        &self,
        lease: &LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<LockLease>, Error> {
        self.provider
            .extend(lease, lock_at_most_for, lock_at_least_for)
            .await
    }

    fn holder(&self) -> &str {
        self.provider.holder()
    }

    fn release_hints(&self) -> Option<tokio::sync::broadcast::Receiver<std::sync::Arc<str>>> {
        self.provider.release_hints()
    }

    fn run_log(&self) -> Option<&dyn RunLog> {
        self.provider.run_log()
    }

    fn inspector(&self) -> Option<&dyn LockInspector> {
        Some(self)
    }

    fn board(&self) -> Option<&dyn shedlock_core::Board> {
        self.provider.board()
    }
}

#[async_trait]
impl<P: LockProvider + LockInspector> LockInspector for WithElector<P> {
    /// The lock while it is held; else the elector's leader of an election of that name;
    /// else the lock as the store has it (free, or none).
    async fn lock_record(&self, name: &str) -> Result<Option<LockRecord>, Error> {
        let lock = self.provider.lock_record(name).await?;
        if lock.as_ref().is_some_and(|lock| lock.held) {
            return Ok(lock);
        }
        match self.elector.leader(name).await? {
            Some(leader) => Ok(Some(leader)),
            None => Ok(lock),
        }
    }

    async fn list_locks(&self, query: &LockQuery) -> Result<Vec<LockRecord>, Error> {
        self.provider.list_locks(query).await
    }

    async fn store_time(&self) -> Result<SystemTime, Error> {
        self.provider.store_time().await
    }

    /// A leader read from the elector is no lock: its release is refused by the provider,
    /// which finds no lease of that holder and token.
    async fn release_lock(&self, record: &LockRecord) -> Result<bool, Error> {
        self.provider.release_lock(record).await
    }
}
