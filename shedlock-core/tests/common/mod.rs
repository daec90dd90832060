//! What the core's integration tests share.

#![allow(dead_code)] // each test binary uses a different part

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use shedlock_core::{
    Error, InMemoryLockProvider, LockConfiguration, LockLease, LockProvider, Operation, async_trait,
};

/// A provider whose connection to the store can be cut.
#[derive(Debug, Clone)]
pub(crate) struct Cuttable {
    pub(crate) inner: InMemoryLockProvider,
    pub(crate) cut: Arc<AtomicBool>,
}

impl Cuttable {
    fn check(&self, operation: Operation, name: &str) -> Result<(), Error> {
        if self.cut.load(Ordering::SeqCst) {
            return Err(Error::store(operation, name, "connection refused"));
        }
        Ok(())
    }
}

#[async_trait]
impl LockProvider for Cuttable {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        self.check(Operation::Acquire, config.name())?;
        self.inner.acquire(config).await
    }
    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        self.check(Operation::Release, lease.name())?;
        self.inner.release(lease).await
    }
    async fn extend(
        &self,
        lease: &LockLease,
        at_most: Duration,
        at_least: Duration,
    ) -> Result<Option<LockLease>, Error> {
        self.check(Operation::Extend, lease.name())?;
        self.inner.extend(lease, at_most, at_least).await
    }
    fn holder(&self) -> &str {
        self.inner.holder()
    }
    fn release_hints(&self) -> Option<tokio::sync::broadcast::Receiver<Arc<str>>> {
        self.inner.release_hints()
    }
}
