//! The provider conformance suite and the inspection cases against the in-memory provider, on
//! a clock that follows the system's and that a test moves ahead by hand.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use shedlock_conformance::Harness;
use shedlock_conformance::fleet::FleetHarness;
use shedlock_conformance::inspection::InspectionHarness;
use shedlock_conformance::runs::RunsHarness;
use shedlock_core::{Board, Clock, InMemoryLockProvider, LockInspector, LockProvider, RunLog};

struct MemoryHarness {
    clock: Arc<SteppedClock>,
    store: InMemoryLockProvider,
}

impl MemoryHarness {
    fn new() -> Self {
        let clock = Arc::new(SteppedClock::default());
        let store = InMemoryLockProvider::new().with_clock(clock.clone());
        MemoryHarness { clock, store }
    }
}

/// The system clock plus the steps a test made: time passes as on a real store (the scheduler
/// cases run in real time), and `pass_time` costs nothing.
#[derive(Debug, Default)]
struct SteppedClock {
    steps: Mutex<Duration>,
}

impl Clock for SteppedClock {
    fn now(&self) -> SystemTime {
        SystemTime::now() + *self.steps.lock().unwrap()
    }
}

#[shedlock_core::async_trait]
impl Harness for MemoryHarness {
    async fn provider(&self, holder: &str) -> Arc<dyn LockProvider> {
        Arc::new(self.store.with_holder(holder))
    }

    async fn pass_time(&self, duration: Duration) {
        *self.clock.steps.lock().unwrap() += duration;
    }
}

#[shedlock_core::async_trait]
impl InspectionHarness for MemoryHarness {
    async fn inspector(&self) -> Arc<dyn LockInspector> {
        Arc::new(self.store.clone())
    }
}

#[shedlock_core::async_trait]
impl RunsHarness for MemoryHarness {
    async fn run_log(&self) -> Arc<dyn RunLog> {
        Arc::new(self.store.clone())
    }

    async fn run_log_keeping(&self, retention: Duration, runs_per_lock: u32) -> Arc<dyn RunLog> {
        Arc::new(
            self.store
                .keeping_runs(retention, runs_per_lock)
                .expect("valid settings"),
        )
    }
}

#[shedlock_core::async_trait]
impl FleetHarness for MemoryHarness {
    async fn board(&self) -> Arc<dyn Board> {
        // A store of its own, on the harness's clock.
        Arc::new(InMemoryLockProvider::new().with_clock(self.clock.clone()))
    }
}

shedlock_conformance::conformance_tests!(async { Some(MemoryHarness::new()) });

mod fleet {
    use super::*;
    shedlock_conformance::fleet_tests!(async { Some(MemoryHarness::new()) });
}

mod runs {
    use super::*;
    shedlock_conformance::runs_tests!(async { Some(MemoryHarness::new()) });
}

mod inspection {
    use super::*;
    shedlock_conformance::inspection_tests!(async { Some(MemoryHarness::new()) });
}

/// A month of a fleet's history on the in-memory store: every lock within its bound, pages of
/// the asked size (the figures of the real stores are in their own tests).
#[tokio::test]
async fn a_month_of_history_stays_bounded() {
    for days in [1, 30] {
        let figures =
            shedlock_conformance::longevity::month_of_history(&MemoryHarness::new(), days).await;
        println!("longevity (memory): {figures}");
        assert!(figures.most_per_lock <= figures.bound_per_lock);
    }
}
