//! The time from a tick's fire time to its claim in the store, as the number of jobs one
//! scheduler carries grows (issue 31: flat from 10 to 100,000 jobs).
//!
//! Ten per-second cron jobs are measured, beside idle ones (a yearly pattern) up to the job
//! count; a wrapper around the provider stamps each acquire of a measured job with the time
//! since its fire time (the whole second it belongs to: every claim comes well within it).
//!
//! Run with: `cargo run --release -p shedlock-bench --bin claim_latency -- [memory|postgres]
//! [job counts…]`, e.g. `-- postgres 10 1000 100000` (default: memory, 10 1000 10000 100000).
//! PostgreSQL at `SHEDLOCK_TEST_PG_URL` (default `postgres://root@127.0.0.1:5432/test`).

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock::provider::{LockLease, async_trait};
use shedlock::{
    Error, InMemoryLockProvider, Job, JobLock, JobRegistry, LockConfiguration, LockInspector,
    LockProvider, RunLog, Schedule, Scheduler, SchedulerConfig,
};

/// Measured jobs, each firing every second.
const MEASURED: usize = 10;
/// How long each job count is measured.
const WINDOW: Duration = Duration::from_secs(20);

/// A provider that records, for every acquire of a measured lock, the time since the start of
/// the second it was asked in (its tick's fire time).
#[derive(Debug)]
struct Stamping {
    inner: Arc<dyn LockProvider>,
    samples: Arc<Mutex<Vec<Duration>>>,
}

#[async_trait]
impl LockProvider for Stamping {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        if config.name().starts_with("measured-") {
            let since_epoch = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default();
            let into_second = Duration::from_nanos(u64::from(since_epoch.subsec_nanos()));
            self.samples.lock().unwrap().push(into_second);
        }
        self.inner.acquire(config).await
    }
    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        self.inner.release(lease).await
    }
    async fn extend(
        &self,
        lease: &LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<LockLease>, Error> {
        self.inner
            .extend(lease, lock_at_most_for, lock_at_least_for)
            .await
    }
    fn holder(&self) -> &str {
        self.inner.holder()
    }
    fn run_log(&self) -> Option<&dyn RunLog> {
        self.inner.run_log()
    }
    fn inspector(&self) -> Option<&dyn LockInspector> {
        self.inner.inspector()
    }
}

fn job(name: String, schedule: Schedule) -> anyhow::Result<Job<()>> {
    let lock = JobLock::new(name.clone())?
        .lock_at_most_for(Duration::from_secs(10))?
        .lock_at_least_for(Duration::ZERO)?;
    Ok(Job::new(name, schedule, |()| async {}).with_lock(lock))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(rank).copied().unwrap_or_default()
}

async fn measure(store: &str, inner: Arc<dyn LockProvider>, jobs: usize) -> anyhow::Result<()> {
    let samples = Arc::new(Mutex::new(Vec::new()));
    let provider = Stamping {
        inner,
        samples: Arc::clone(&samples),
    };
    let every_second = Schedule::cron("* * * * * *")?;
    let yearly = Schedule::cron("0 0 0 1 1 *")?;
    let run = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis();
    let mut registry = JobRegistry::new(());
    for i in 0..jobs {
        registry = registry.add(match i < MEASURED {
            true => job(format!("measured-{run}-{i}"), every_second.clone())?,
            false => job(format!("idle-{run}-{i}"), yearly.clone())?,
        });
    }
    let scheduler = Scheduler::builder()
        .provider(provider)
        .config(SchedulerConfig::default())
        .registry(registry)
        .start()
        .await?;
    // Past the first ticks (connections opened, the timer filled).
    tokio::time::sleep(Duration::from_secs(2)).await;
    samples.lock().unwrap().clear();
    tokio::time::sleep(WINDOW).await;
    let mut taken = std::mem::take(&mut *samples.lock().unwrap());
    scheduler.shutdown().await;
    taken.sort_unstable();
    println!(
        "claim_latency store={store} jobs={jobs} measured={MEASURED} samples={} median_ms={:.2} \
         p99_ms={:.2} max_ms={:.2}",
        taken.len(),
        percentile(&taken, 0.5).as_secs_f64() * 1e3,
        percentile(&taken, 0.99).as_secs_f64() * 1e3,
        taken.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1).peekable();
    let store = match args.peek().map(String::as_str) {
        Some("memory" | "postgres") => args.next().unwrap_or_default(),
        _ => "memory".to_owned(),
    };
    let counts: Vec<usize> = args
        .map(|count| count.replace(['_', ','], "").parse())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("job counts are whole numbers: {e}"))?;
    let counts = match counts.is_empty() {
        true => vec![10, 1_000, 10_000, 100_000],
        false => counts,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async {
        let inner: Arc<dyn LockProvider> = match store.as_str() {
            "postgres" => {
                let url = std::env::var("SHEDLOCK_TEST_PG_URL")
                    .unwrap_or_else(|_| "postgres://root@127.0.0.1:5432/test".to_owned());
                let provider = shedlock::sql::PgLockProvider::connect(&url).await?;
                provider.create_schema().await?;
                Arc::new(provider)
            }
            _ => Arc::new(InMemoryLockProvider::new()),
        };
        for jobs in counts {
            measure(&store, Arc::clone(&inner), jobs.max(MEASURED)).await?;
        }
        Ok(())
    })
}
