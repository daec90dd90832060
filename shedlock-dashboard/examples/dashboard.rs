//! The dashboard over a live fleet: three instances (three schedulers sharing one in-memory
//! store) run a job every two seconds, another that fails now and then, and a slow one; the
//! page shows who ran each tick.
//!
//! Run with: `cargo run -p shedlock-dashboard --example dashboard`, then open
//! <http://127.0.0.1:8080/>. Add `-- release` to allow releasing locks with the token `demo`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use shedlock_core::{
    InMemoryLockProvider, Job, JobLock, JobRegistry, Schedule, Scheduler, SchedulerConfig,
};
use shedlock_dashboard::{DashboardOptions, router};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = InMemoryLockProvider::new();
    let imports = Arc::new(AtomicU64::new(0));
    let mut schedulers = Vec::new();
    for instance in 1..=3 {
        let imports = Arc::clone(&imports);
        let report = Job::new(
            "send_report",
            Schedule::fixed_rate(Duration::from_secs(2))?,
            |()| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
            },
        )
        .with_lock(JobLock::new("send_report")?);
        let import = Job::new(
            "import_orders",
            Schedule::fixed_rate(Duration::from_secs(5))?,
            move |()| {
                let attempt = imports.fetch_add(1, Ordering::Relaxed);
                async move {
                    match attempt % 3 {
                        2 => Err(std::io::Error::other(
                            "orders API answered 503 Service Unavailable",
                        )),
                        _ => Ok(()),
                    }
                }
            },
        )
        .with_lock(JobLock::new("import_orders")?);
        let rebuild = Job::new(
            "rebuild_index",
            Schedule::fixed_rate(Duration::from_secs(20))?,
            |()| async {
                tokio::time::sleep(Duration::from_secs(8)).await;
            },
        )
        .with_lock(JobLock::new("rebuild_index")?);
        let scheduler = Scheduler::builder()
            .provider(store.with_holder(format!("web-{instance}")))
            .config(SchedulerConfig::default())
            .registry(JobRegistry::new(()).add(report).add(import).add(rebuild))
            .start()
            .await?;
        schedulers.push(scheduler);
    }

    let mut options = DashboardOptions::new().timeline(Duration::from_secs(300));
    if std::env::args().nth(1).as_deref() == Some("release") {
        options = options.allow_release("demo");
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
    println!("dashboard at http://127.0.0.1:8080/ (ctrl-c to stop)");
    axum::serve(listener, router(store, options))
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    for scheduler in &schedulers {
        scheduler.shutdown().await;
    }
    Ok(())
}
