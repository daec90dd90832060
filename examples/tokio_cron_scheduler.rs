//! Locking jobs of a tokio-cron-scheduler `JobScheduler` you already have: each tick of a
//! locked job runs on one instance only; the scheduler stays tokio-cron-scheduler's.
//!
//! Run with: `cargo run --example tokio_cron_scheduler` (stops by itself after 12 seconds), or
//! `cargo run --example tokio_cron_scheduler -- 1m` for longer.
//! Start it in several shells at once: the locked jobs run in one of them per tick, the others
//! print `skipped`; the unlocked heartbeat runs in all of them. The lock table is a SQLite file
//! in the temp directory, shared by the shells.

use std::time::Duration;

use shedlock::tokio_cron::{IntoTokioCronJob, locked_job};
use shedlock::{
    LockConfiguration, LockContext, LockEvent, LockingTaskExecutor, SchedulerConfig, scheduled,
    scheduler_lock, sql::SqliteLockProvider,
};
use tokio_cron_scheduler::{Job, JobScheduler};

/// Shared by every run of the annotated job (cloned per run).
#[derive(Clone)]
struct AppState {
    instance: String,
}

/// A `#[scheduled]` job: its cron, lock and keep-alive come with it. tokio-cron-scheduler
/// fires an instance's tick up to half a second late, so the lock is kept at least 2 s: the
/// other instances' triggers for the same tick find it taken.
#[scheduled(cron = "*/5 * * * * *")]
#[scheduler_lock(
    name = "send_report",
    lock_at_most_for = "30s",
    lock_at_least_for = "2s",
    keep_alive = true
)]
async fn send_report(state: AppState, lock: LockContext) -> Result<(), std::io::Error> {
    println!(
        "{}: send_report (fencing token {})",
        state.instance,
        lock.fencing_token()
    );
    // Long work watches the lost-lock signal.
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(200)) => {}
        () = lock.cancelled() => println!("send_report: lock lost, stopping"),
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info,tokio_cron_scheduler=warn".into()),
        )
        .init();
    let run_for = match std::env::args().nth(1) {
        Some(run_for) => humantime::parse_duration(&run_for)?,
        None => Duration::from_secs(12),
    };

    // Defaults for what the annotated job leaves unset, and this instance's holder name
    // (`host:pid:random` unless set); a service would load it from a file.
    let config = SchedulerConfig::default();
    let instance = config.holder_or_default().to_owned();

    let database = std::env::temp_dir().join("shedlock-tokio-cron-example.db");
    let provider = SqliteLockProvider::connect(&format!("sqlite://{}", database.display()))
        .await?
        .with_holder(&instance)?;
    provider.create_schema().await?;
    let skipping = instance.clone();
    let executor =
        LockingTaskExecutor::new(provider).with_listener(move |event: &LockEvent<'_>| {
            if let LockEvent::Skipped { .. } = event {
                println!("{skipping}: {event}");
            }
        });
    let mut scheduler = JobScheduler::new().await?;

    // A job the service already had: unlocked, so it runs on every instance.
    let heartbeat = instance.clone();
    scheduler
        .add(Job::new_async("*/4 * * * * *", move |_id, _scheduler| {
            let instance = heartbeat.clone();
            Box::pin(async move { println!("{instance}: heartbeat (every instance)") })
        })?)
        .await?;

    // The annotated job, with its own schedule, lock and keep-alive.
    let state = AppState {
        instance: instance.clone(),
    };
    scheduler
        .add(shedlock::job!(send_report).into_tokio_cron_job(&executor, &config, state)?)
        .await?;

    // Any closure, under a lock configured in place.
    let lock = LockConfiguration::new(
        "import_orders",
        Duration::from_secs(60),
        Duration::from_secs(2),
    )?;
    scheduler
        .add(locked_job("*/3 * * * * *", &executor, lock, move || {
            let instance = instance.clone();
            async move {
                let lock = LockContext::current()?;
                println!(
                    "{instance}: import_orders (fencing token {})",
                    lock.fencing_token()
                );
                Ok::<(), shedlock::Error>(())
            }
        })?)
        .await?;

    scheduler.start().await?;
    tokio::time::sleep(run_for).await;
    // tokio-cron-scheduler's shutdown stops ticking but waits for no running job.
    scheduler.shutdown().await?;
    println!("stopped");
    Ok(())
}
