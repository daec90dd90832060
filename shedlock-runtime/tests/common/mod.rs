//! What the core's integration tests share.

#![allow(dead_code)] // each test binary uses a different part

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shedlock_core::{
    Error, InMemoryLockProvider, LockConfiguration, LockInspector, LockLease, LockProvider,
    Operation, RunEnd, RunLog, RunQuery, RunRecord, RunStart, TokioClock, async_trait,
};
use shedlock_runtime::{IntoJobResult, Job, JobRegistry, Schedule, Scheduler, SchedulerBuilder};

/// An in-memory store on tokio's clock (paused in most tests).
pub(crate) fn tokio_store() -> InMemoryLockProvider {
    InMemoryLockProvider::new().with_clock(Arc::new(TokioClock::new()))
}

/// A job whose every run gets a clone of `shared` (what the test looks at afterwards).
pub(crate) fn sharing<T, F, Fut>(name: &str, schedule: Schedule, shared: &T, run: F) -> Job<()>
where
    T: Clone + Send + Sync + 'static,
    F: Fn(T) -> Fut + Send + Sync + 'static,
    Fut: Future<Output: IntoJobResult> + Send + 'static,
{
    let shared = shared.clone();
    Job::new(name.to_owned(), schedule, move |()| run(shared.clone()))
}

/// A job that counts its runs in `runs`.
pub(crate) fn counting(name: &str, schedule: Schedule, runs: &Arc<AtomicUsize>) -> Job<()> {
    sharing(name, schedule, runs, |runs| async move {
        runs.fetch_add(1, Ordering::SeqCst);
    })
}

/// Starts `builder` with `job` as its only job.
pub(crate) async fn start_one(builder: SchedulerBuilder<()>, job: Job<()>) -> Scheduler {
    builder
        .registry(JobRegistry::new(()).add(job))
        .start()
        .await
        .unwrap()
}

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
    fn run_log(&self) -> Option<&dyn RunLog> {
        Some(self)
    }
    fn inspector(&self) -> Option<&dyn LockInspector> {
        self.inner.inspector()
    }
}

/// Run records go through the same cut.
#[async_trait]
impl RunLog for Cuttable {
    async fn run_started(&self, start: &RunStart) -> Result<RunRecord, Error> {
        self.check(Operation::Runs, &start.lock)?;
        self.inner.run_started(start).await
    }
    async fn run_finished(&self, start: &RunStart, end: &RunEnd) -> Result<(), Error> {
        self.check(Operation::Runs, &start.lock)?;
        self.inner.run_finished(start, end).await
    }
    async fn run_alive(&self, start: &RunStart, lease: Duration) -> Result<bool, Error> {
        self.check(Operation::Runs, &start.lock)?;
        self.inner.run_alive(start, lease).await
    }
    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        self.check(Operation::Runs, query.lock.as_deref().unwrap_or("*"))?;
        self.inner.runs(query).await
    }
}

/// A provider whose answers take time (tokio time: use it with a paused clock), and which
/// writes down the operations it sees.
#[derive(Debug, Clone)]
pub(crate) struct Slow {
    pub(crate) inner: InMemoryLockProvider,
    /// How long an acquisition takes, after `acquiring` is notified.
    pub(crate) acquire: Duration,
    /// How long an extension's answer takes to come back, after the store applied it.
    pub(crate) extend_answer: Duration,
    /// Notified when an acquisition starts.
    pub(crate) acquiring: Arc<tokio::sync::Notify>,
    /// "extend sent", "extend answered", "extend abandoned" (dropped before its answer), "release".
    pub(crate) journal: Arc<Mutex<Vec<&'static str>>>,
}

impl Slow {
    pub(crate) fn new(inner: InMemoryLockProvider) -> Self {
        Slow {
            inner,
            acquire: Duration::ZERO,
            extend_answer: Duration::ZERO,
            acquiring: Arc::default(),
            journal: Arc::default(),
        }
    }

    /// The same, with acquisitions that take `acquire`.
    pub(crate) fn acquiring_for(self, acquire: Duration) -> Self {
        Slow { acquire, ..self }
    }

    pub(crate) fn journal(&self) -> Vec<&'static str> {
        self.journal.lock().unwrap().clone()
    }

    fn note(&self, what: &'static str) {
        self.journal.lock().unwrap().push(what);
    }
}

/// Notes "extend abandoned" unless disarmed: the caller dropped the request mid-flight.
struct Abandoned<'a>(Option<&'a Slow>);

impl Drop for Abandoned<'_> {
    fn drop(&mut self) {
        if let Some(slow) = self.0 {
            slow.note("extend abandoned");
        }
    }
}

#[async_trait]
impl LockProvider for Slow {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        self.acquiring.notify_one();
        tokio::time::sleep(self.acquire).await;
        self.inner.acquire(config).await
    }
    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        self.note("release");
        self.inner.release(lease).await
    }
    async fn extend(
        &self,
        lease: &LockLease,
        at_most: Duration,
        at_least: Duration,
    ) -> Result<Option<LockLease>, Error> {
        self.note("extend sent");
        let mut abandoned = Abandoned(Some(self));
        let extended = self.inner.extend(lease, at_most, at_least).await;
        tokio::time::sleep(self.extend_answer).await;
        abandoned.0 = None;
        self.note("extend answered");
        extended
    }
    fn holder(&self) -> &str {
        self.inner.holder()
    }
}
