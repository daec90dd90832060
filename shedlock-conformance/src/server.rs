//! The conformance suite's harness for a store on a real server.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;

use crate::Harness;
use crate::fleet::FleetHarness;
use crate::inspection::InspectionHarness;
use crate::runs::RunsHarness;
use shedlock_core::{Board, LockInspector, LockProvider, RunLog};

type ProviderFor = dyn Fn(&str) -> Arc<dyn LockProvider> + Send + Sync;
type RunLogKeeping = dyn Fn(Duration, u32) -> Arc<dyn RunLog> + Send + Sync;
type BoardMaker = dyn Fn() -> BoxFuture<'static, Arc<dyn Board>> + Send + Sync;

/// The conformance harness for a store on a real server: the provider for each holder comes
/// from a closure (all on one store), and time passes by really waiting, since a server's clock
/// cannot be stepped. With [`with_inspector`](Self::with_inspector) and
/// [`with_run_log`](Self::with_run_log) it runs the inspection and run-record cases too, with
/// [`with_boards`](Self::with_boards) the fleet's board cases.
pub struct ServerHarness {
    provider_for: Box<ProviderFor>,
    inspector: Option<Arc<dyn LockInspector>>,
    run_log: Option<Arc<dyn RunLog>>,
    run_log_keeping: Option<Box<RunLogKeeping>>,
    boards: Option<Box<BoardMaker>>,
    short_lease: Option<Duration>,
}

impl ServerHarness {
    /// A harness whose provider for `holder` is `provider_for(holder)`.
    pub fn new(
        provider_for: impl Fn(&str) -> Arc<dyn LockProvider> + Send + Sync + 'static,
    ) -> Self {
        ServerHarness {
            provider_for: Box::new(provider_for),
            inspector: None,
            run_log: None,
            run_log_keeping: None,
            boards: None,
            short_lease: None,
        }
    }

    /// The same, with `boards()` making a board of its own on the store each call (a fresh
    /// table, key prefix or root: for `fleet_tests!`).
    pub fn with_boards<F, B>(mut self, boards: F) -> Self
    where
        F: Fn() -> B + Send + Sync + 'static,
        B: Future<Output = Arc<dyn Board>> + Send + 'static,
    {
        self.boards = Some(Box::new(move || Box::pin(boards())));
        self
    }

    /// The same, inspecting the store through `inspector` (for `inspection_tests!`).
    pub fn with_inspector(mut self, inspector: impl LockInspector) -> Self {
        self.inspector = Some(Arc::new(inspector));
        self
    }

    /// The same, reading and writing run records through `run_log` (for `runs_tests!`).
    pub fn with_run_log(mut self, run_log: impl RunLog) -> Self {
        self.run_log = Some(Arc::new(run_log));
        self
    }

    /// The same, with `keeping(retention, runs_per_lock)` building a run log on the same store
    /// whose builder was given those settings (for the bounds cases of `runs_tests!` and the
    /// longevity test).
    pub fn with_run_log_keeping(
        mut self,
        keeping: impl Fn(Duration, u32) -> Arc<dyn RunLog> + Send + Sync + 'static,
    ) -> Self {
        self.run_log_keeping = Some(Box::new(keeping));
        self
    }

    /// The same, with `lease` as the suite's short lease, for stores whose leases cannot be
    /// as short as the default 800 ms (etcd's are whole seconds, 2 s at least).
    pub fn with_short_lease(mut self, lease: Duration) -> Self {
        self.short_lease = Some(lease);
        self
    }
}

impl fmt::Debug for ServerHarness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerHarness").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl Harness for ServerHarness {
    async fn provider(&self, holder: &str) -> Arc<dyn LockProvider> {
        (self.provider_for)(holder)
    }

    async fn pass_time(&self, duration: Duration) {
        tokio::time::sleep(duration).await;
    }

    fn short_lease(&self) -> Duration {
        self.short_lease.unwrap_or(Duration::from_millis(800))
    }
}

#[async_trait::async_trait]
impl InspectionHarness for ServerHarness {
    async fn inspector(&self) -> Arc<dyn LockInspector> {
        let inspector = self.inspector.as_ref();
        Arc::clone(inspector.expect("build the harness with `with_inspector`"))
    }
}

#[async_trait::async_trait]
impl RunsHarness for ServerHarness {
    async fn run_log(&self) -> Arc<dyn RunLog> {
        let run_log = self.run_log.as_ref();
        Arc::clone(run_log.expect("build the harness with `with_run_log`"))
    }

    async fn run_log_keeping(&self, retention: Duration, runs_per_lock: u32) -> Arc<dyn RunLog> {
        let keeping = self.run_log_keeping.as_ref();
        keeping.expect("build the harness with `with_run_log_keeping`")(retention, runs_per_lock)
    }
}

#[async_trait::async_trait]
impl FleetHarness for ServerHarness {
    async fn board(&self) -> Arc<dyn Board> {
        let boards = self.boards.as_ref();
        boards.expect("build the harness with `with_boards`")().await
    }
}
