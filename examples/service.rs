//! A service with two locked jobs and one unlocked job, configured from a TOML file.
//!
//! Run with: `cargo run --example service` (stop with ctrl-c), or
//! `cargo run --example service -- 10s` to stop by itself after ten seconds.
//! Start it in several shells at once: the locked jobs run in only one of them per tick,
//! the unlocked heartbeat runs in all of them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use shedlock::{
    JobRegistry, LockContext, Scheduler, SchedulerConfig, scheduled, scheduler_lock,
    sql::SqliteLockProvider,
};

/// Shared by every job run (cloned per run; keep it cheap: `Arc`s and pools).
#[derive(Clone)]
struct AppState {
    reports_sent: Arc<AtomicU64>,
}

/// Every 5 seconds on one instance; the lock stays at least 2 s so instances firing a little
/// later do not repeat the same tick.
#[scheduled(cron = "*/5 * * * * *")]
#[scheduler_lock(
    name = "send_report",
    lock_at_most_for = "1m",
    lock_at_least_for = "2s"
)]
async fn send_report(state: AppState, lock: LockContext) -> Result<(), std::io::Error> {
    let sent = state.reports_sent.fetch_add(1, Ordering::Relaxed) + 1;
    println!(
        "send_report: report #{sent} (fencing token {})",
        lock.fencing_token()
    );
    Ok(())
}

/// Every 3 seconds after the previous run ended, on one instance, with the configured
/// default durations. Long work watches the lost-lock signal.
#[scheduled(fixed_delay = "3s", initial_delay = "1s")]
#[scheduler_lock(name = "purge_sessions")]
async fn purge_sessions(lock: LockContext) {
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(300)) => println!("purge_sessions: purged"),
        () = lock.cancelled() => println!("purge_sessions: stopped early, lock lost or shutting down"),
    }
}

/// Every 2 seconds on every instance: no lock.
#[scheduled(fixed_rate = "2s")]
async fn heartbeat() {
    println!("heartbeat: this instance is alive");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()))
        .init();
    let config_path = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/service.toml");
    let config: SchedulerConfig = toml::from_str(&std::fs::read_to_string(config_path)?)?;
    config.validate()?;

    let database = std::env::temp_dir().join("shedlock-service-example.db");
    let provider = SqliteLockProvider::connect(&format!("sqlite://{}", database.display())).await?;
    provider.create_schema().await?;

    let state = AppState {
        reports_sent: Arc::default(),
    };
    let registry = JobRegistry::new(state)
        .add(shedlock::job!(send_report))
        .add(shedlock::job!(purge_sessions))
        .add(shedlock::job!(heartbeat));
    let scheduler = Scheduler::builder()
        .provider(provider)
        .config(config)
        .registry(registry)
        .start()
        .await?;
    for job in scheduler.status() {
        println!(
            "registered {} ({}), lock: {:?}",
            job.name, job.schedule, job.lock_name
        );
    }

    let report = match std::env::args().nth(1) {
        Some(run_for) => {
            tokio::time::sleep(humantime::parse_duration(&run_for)?).await;
            scheduler.shutdown().await
        }
        None => scheduler.shutdown_on_signal().await,
    };
    println!("stopped: {report:?}");
    Ok(())
}
