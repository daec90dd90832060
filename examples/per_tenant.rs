//! One job per customer, on the schedule the customer chose: thousands of jobs on one
//! scheduler, customers added, moved to another schedule and removed while it runs.
//!
//! Run with: `cargo run --example per_tenant`
//!
//! No set-up (an in-memory store); it runs for about six seconds and ends with a `summary:`
//! line. It exits non-zero if a tenant's tick ran twice, a removed tenant ran after its
//! removal returned, or a tenant missed a tick of its schedule.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use shedlock::{
    InMemoryLockProvider, Job, JobControl, JobLock, JobRegistry, RemoveMode, RunContext, Schedule,
    Scheduler, SchedulerConfig,
};

const TENANTS: usize = 3_000;
const CHANGED: usize = 500;
const RUN_FOR: Duration = Duration::from_secs(6);

/// What the reports of every tenant share: the runs, as (tenant, tick) pairs.
#[derive(Clone, Default)]
struct Reports {
    runs: Arc<Mutex<Vec<(usize, SystemTime)>>>,
}

/// A tenant's chosen schedule: every 1, 2, 3 or 5 seconds.
fn every(tenant: usize, moved: bool) -> u64 {
    [1, 2, 3, 5][(tenant + usize::from(moved)) % 4]
}

/// The report job of `tenant`, every `seconds`, under a lock of its own.
fn report(tenant: usize, seconds: u64) -> anyhow::Result<Job<Reports>> {
    let schedule = Schedule::cron(&format!("*/{seconds} * * * * *"))?;
    let job = Job::new(
        format!("report-{tenant}"),
        schedule,
        move |reports: Reports| async move {
            let tick = RunContext::current().and_then(|run| run.tick());
            if let Some(tick) = tick {
                reports.runs.lock().unwrap().push((tenant, tick));
            }
            tokio::time::sleep(Duration::from_millis(20)).await; // the "work"
        },
    );
    Ok(job.with_lock(
        JobLock::new(format!("tenant-report-{tenant}"))?
            .lock_at_most_for(Duration::from_secs(60))?,
    ))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let reports = Reports::default();
    let scheduler = Scheduler::builder()
        .provider(InMemoryLockProvider::new())
        .config(SchedulerConfig::default())
        .registry(JobRegistry::new(reports.clone()))
        .start()
        .await?;
    let tenants = scheduler.job_control::<Reports>()?;
    let started = Instant::now();

    // The customers there are at startup (from a database, in a real service).
    for tenant in 0..TENANTS {
        tenants.add(report(tenant, every(tenant, false))?).await?;
    }
    println!("{TENANTS} tenants added in {:?}", started.elapsed());
    tokio::time::sleep(RUN_FOR / 2).await;

    // Customers change their minds: some move to another schedule, some leave, some arrive.
    let changed = Instant::now();
    let moved = 0..CHANGED;
    let left = CHANGED..2 * CHANGED;
    let arrived = TENANTS..TENANTS + CHANGED;
    for tenant in moved.clone() {
        tenants
            .replace(report(tenant, every(tenant, true))?)
            .await?;
    }
    // When each removal returned: no tick of that tenant may start after it.
    let mut gone = HashMap::new();
    for tenant in left.clone() {
        remove(&tenants, tenant).await?;
        gone.insert(tenant, SystemTime::now());
    }
    for tenant in arrived.clone() {
        tenants.add(report(tenant, every(tenant, false))?).await?;
    }
    println!(
        "{CHANGED} moved, {CHANGED} removed, {CHANGED} added in {:?}",
        changed.elapsed()
    );
    tokio::time::sleep(RUN_FOR / 2).await;
    scheduler.shutdown().await;
    let status = scheduler.status();

    let runs = reports.runs.lock().unwrap().clone();
    let mut per_tick: BTreeMap<(usize, SystemTime), usize> = BTreeMap::new();
    for run in &runs {
        *per_tick.entry(*run).or_default() += 1;
    }
    let twice = per_tick.values().filter(|&&count| count > 1).count();
    let after_removal = runs
        .iter()
        .filter(|(tenant, tick)| gone.get(tenant).is_some_and(|removed| tick > removed))
        .count();
    let missed: u64 = status.iter().map(|job| job.missed_ticks).sum();
    println!(
        "summary: tenants={} runs={} ticks_run_twice={twice} runs_after_removal={after_removal} \
         missed_ticks={missed}",
        status.len(),
        runs.len()
    );
    if twice > 0 || after_removal > 0 || missed > 0 || status.len() != TENANTS {
        anyhow::bail!("a tick ran twice, a removed tenant ran, or a tick was missed");
    }
    Ok(())
}

/// A tenant leaves: its report is removed; a report running now finishes first.
async fn remove(tenants: &JobControl<Reports>, tenant: usize) -> anyhow::Result<()> {
    tenants
        .remove(&format!("report-{tenant}"), RemoveMode::Finish)
        .await?;
    Ok(())
}
