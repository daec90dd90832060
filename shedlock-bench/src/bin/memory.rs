//! Memory figures (issue 16): resident memory of a scheduler holding 10,000 registered jobs,
//! and heap allocations per run on the hot path (an executor's `execute`, a scheduler tick),
//! all on the in-memory provider, so what is counted is ours and the runtime's, not a driver's.
//!
//! Run with: `cargo run --release -p shedlock-bench --bin memory` (10,000 jobs), or with the job
//! counts to measure: `cargo run --release -p shedlock-bench --bin memory -- 10000 100000`.
//!
//! A binary of its own because it counts every allocation through a global allocator wrapper
//! (`stats_alloc`), which the throughput benchmarks must not pay for.

use std::alloc::System;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use shedlock::{
    InMemoryLockProvider, IntoJobResult, Job, JobLock, JobRegistry, LockConfiguration,
    LockingTaskExecutor, Schedule, Scheduler, SchedulerConfig,
};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[path = "../proc_status.rs"]
mod proc_status;

use proc_status::status_kib;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

const JOBS: usize = 10_000;
const EXECUTIONS: u64 = 100_000;

/// Heap bytes allocated and not yet freed. `stats_alloc` counts a reallocation's growth in
/// `bytes_allocated` (and its shrinking in `bytes_deallocated`) already: `bytes_reallocated`
/// is the same change again, not to be added (it counted every `Vec` growth twice).
fn live_heap() -> i64 {
    let stats = GLOBAL.stats();
    stats.bytes_allocated as i64 - stats.bytes_deallocated as i64
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

/// `count` jobs named `<prefix>-<i>`, each running `run` on `schedule()` under a lock
/// of its own.
fn locked_jobs<S, F, Fut>(
    state: S,
    prefix: &str,
    count: usize,
    mut schedule: impl FnMut() -> Result<Schedule, shedlock::Error>,
    run: F,
) -> anyhow::Result<JobRegistry<S>>
where
    F: Fn(S) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output: IntoJobResult> + Send + 'static,
{
    let mut registry = JobRegistry::new(state);
    for i in 0..count {
        let name = format!("{prefix}-{i}");
        let lock = JobLock::new(name.clone())?
            .lock_at_most_for(Duration::from_secs(10))?
            .lock_at_least_for(Duration::ZERO)?;
        registry = registry.add(Job::new(name, schedule()?, run.clone()).with_lock(lock));
    }
    Ok(registry)
}

/// A scheduler over `registry` on the in-memory provider, with the default configuration.
async fn start<S: Clone + Send + Sync + 'static>(
    registry: JobRegistry<S>,
) -> Result<Scheduler, shedlock::Error> {
    Scheduler::builder()
        .provider(InMemoryLockProvider::new())
        .config(SchedulerConfig::default())
        .registry(registry)
        .start()
        .await
}

/// Resident memory and live heap before registering, with `jobs` jobs registered, and with
/// their scheduler started and idle (every job's next fire is a year away).
async fn scheduler_with_many_jobs(jobs: usize) -> anyhow::Result<()> {
    let (rss_empty, heap_empty) = (status_kib("VmRSS"), live_heap());
    let yearly = || Schedule::cron("0 0 0 1 1 *");
    let registry = locked_jobs((), "job", jobs, yearly, |()| async {})?;
    let (rss_registered, heap_registered) = (status_kib("VmRSS"), live_heap());
    let scheduler = start(registry).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (rss_started, heap_started) = (status_kib("VmRSS"), live_heap());
    let per_job = |bytes: i64| bytes as f64 / jobs as f64;
    println!(
        "memory scheduler_jobs={jobs} rss_mib before={:.1} registered={:.1} started_idle={:.1} \
         heap_mib before={:.2} registered={:.2} started_idle={:.2} \
         heap_bytes_per_job registered={:.0} started={:.0} started_beyond_registered={:.0}",
        mib(rss_empty),
        mib(rss_registered),
        mib(rss_started),
        heap_empty as f64 / 1048576.0,
        heap_registered as f64 / 1048576.0,
        heap_started as f64 / 1048576.0,
        per_job(heap_registered - heap_empty),
        per_job(heap_started - heap_empty),
        per_job(heap_started - heap_registered),
    );
    scheduler.shutdown().await;
    drop(scheduler);
    Ok(())
}

/// Heap of the cron patterns alone, and of jobs sharing one `Schedule`.
fn schedule_sharing() -> anyhow::Result<()> {
    let per_job = |bytes: i64| bytes as f64 / JOBS as f64;

    // Heap only from here (freed memory stays resident): one `Schedule::cron` per job alone
    // (the parsed pattern is shared by expression), and jobs registered with clones of one
    // `Schedule`.
    let heap_before = live_heap();
    let schedules = (0..JOBS)
        .map(|_| Schedule::cron("0 0 0 1 1 *"))
        .collect::<Result<Vec<_>, _>>()?;
    let cron_bytes = per_job(live_heap() - heap_before);
    drop(schedules);
    let heap_before = live_heap();
    let schedule = Schedule::cron("0 0 0 1 1 *")?;
    let registry = locked_jobs((), "job", JOBS, || Ok(schedule.clone()), |()| async {})?;
    println!(
        "memory heap_bytes_per_cron_schedule={cron_bytes:.0} \
         heap_bytes_per_job_sharing_one_schedule={:.0}",
        per_job(live_heap() - heap_before)
    );
    drop(registry);
    Ok(())
}

/// Allocations and bytes per `execute` of an empty job, uncontended, on one name.
async fn executor_allocations() -> anyhow::Result<()> {
    let executor = LockingTaskExecutor::new(InMemoryLockProvider::new());
    let config = LockConfiguration::new("hot", Duration::from_secs(10), Duration::ZERO)?;
    for _ in 0..1000 {
        anyhow::ensure!(executor.execute(&config, async {}).await?.was_executed());
    }
    let region = Region::new(GLOBAL);
    for _ in 0..EXECUTIONS {
        let _ = executor.execute(&config, async {}).await?;
    }
    let stats = region.change();
    println!(
        "memory executor_execute runs={EXECUTIONS} allocations_per_run={:.2} bytes_per_run={:.0} \
         reallocations_per_run={:.2}",
        stats.allocations as f64 / EXECUTIONS as f64,
        stats.bytes_allocated as f64 / EXECUTIONS as f64,
        stats.reallocations as f64 / EXECUTIONS as f64,
    );
    Ok(())
}

/// Allocations and bytes per scheduler tick of an empty locked job: everything the process
/// allocates in a window, over the ticks executed in it (so the runtime's own share is in).
async fn tick_allocations(
    label: &str,
    jobs: usize,
    schedule: Schedule,
    window: Duration,
) -> anyhow::Result<()> {
    let executed = Arc::new(AtomicU64::new(0));
    let count = |count: Arc<AtomicU64>| async move {
        count.fetch_add(1, Ordering::Relaxed);
    };
    let registry = locked_jobs(
        Arc::clone(&executed),
        "tick",
        jobs,
        || Ok(schedule.clone()),
        count,
    )?;
    let scheduler = start(registry).await?;
    // Past the first ticks (status slots, timers and connections set up once).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = executed.load(Ordering::Relaxed);
    let region = Region::new(GLOBAL);
    tokio::time::sleep(window).await;
    let stats = region.change();
    let ticks = executed.load(Ordering::Relaxed) - before;
    scheduler.shutdown().await;
    println!(
        "memory scheduler_tick schedule={label} jobs={jobs} ticks={ticks} allocations_per_tick={:.2} \
         bytes_per_tick={:.0} reallocations_per_tick={:.2}",
        stats.allocations as f64 / ticks.max(1) as f64,
        stats.bytes_allocated as f64 / ticks.max(1) as f64,
        stats.reallocations as f64 / ticks.max(1) as f64,
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let counts: Vec<usize> = std::env::args()
        .skip(1)
        .map(|count| count.replace(['_', ','], "").parse())
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("job counts are whole numbers: {e}"))?;
    runtime.block_on(async {
        // Resident memory only grows: the largest count last.
        let mut counts = if counts.is_empty() {
            vec![JOBS]
        } else {
            counts
        };
        counts.sort_unstable();
        for jobs in counts {
            scheduler_with_many_jobs(jobs).await?;
        }
        schedule_sharing()?;
        executor_allocations().await?;
        tick_allocations(
            "fixed_rate_10ms",
            1,
            Schedule::fixed_rate(Duration::from_millis(10))?,
            Duration::from_secs(3),
        )
        .await?;
        tick_allocations(
            "cron_every_second",
            100,
            Schedule::cron("* * * * * *")?,
            Duration::from_secs(5),
        )
        .await
    })
}
