//! The dashboard over a live fleet: three instances (three schedulers sharing one in-memory
//! store) run a job every two seconds, another that fails now and then, and a slow one; the
//! page shows who ran each tick.
//!
//! Run with: `cargo run -p shedlock-dashboard --example dashboard`, then open
//! <http://127.0.0.1:8080/> (the jobs; the locks at `?view=locks`). Add `-- release` to allow
//! releasing locks, pausing, resuming and running jobs with the token `demo-release-token`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use shedlock_core::{Error, InMemoryLockProvider};
use shedlock_dashboard::{DashboardOptions, router};
use shedlock_runtime::{Job, JobLock, JobRegistry, Schedule, Scheduler, SchedulerConfig};

/// A job, locked under its own name, that works for `work` every `every`.
fn working(name: &'static str, every: Duration, work: Duration) -> Result<Job<()>, Error> {
    let job = Job::new(name, Schedule::fixed_rate(every)?, move |()| {
        tokio::time::sleep(work)
    });
    Ok(job.with_lock(JobLock::new(name)?))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let store = InMemoryLockProvider::new();
    let imports = Arc::new(AtomicU64::new(0));
    let mut schedulers = Vec::new();
    for instance in 1..=3 {
        let imports = Arc::clone(&imports);
        let report = working(
            "send_report",
            Duration::from_secs(2),
            Duration::from_millis(300),
        )?;
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
        let rebuild = working(
            "rebuild_index",
            Duration::from_secs(20),
            Duration::from_secs(8),
        )?;
        let scheduler = Scheduler::builder()
            .provider(store.with_holder(format!("web-{instance}")))
            .config(SchedulerConfig::default())
            .registry(JobRegistry::new(()).add(report).add(import).add(rebuild))
            // On the jobs view, with their carriers; pausable from it with `-- release`.
            .publish_jobs()
            .start()
            .await?;
        schedulers.push(scheduler);
    }

    let mut options = DashboardOptions::new().timeline(Duration::from_secs(300));
    if std::env::args().nth(1).as_deref() == Some("release") {
        options = options.allow_release("demo-release-token")?;
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
