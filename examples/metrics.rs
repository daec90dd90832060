//! Metrics of a scheduler's locks and runs, served for Prometheus at `/metrics`.
//!
//! Run with: `cargo run --example metrics` (stop with ctrl-c), then
//! `curl -s 127.0.0.1:9464/metrics | grep shedlock_`. An optional argument is another
//! address to serve on, e.g. `-- 127.0.0.1:9100`.
//!
//! Two locked jobs on an SQLite database in memory: one succeeds every second, one fails every
//! two seconds. Every metric is listed in the README's "Metrics" section.

use std::net::SocketAddr;
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use shedlock::{
    Job, JobLock, JobRegistry, Schedule, Scheduler, SchedulerConfig, sql::SqliteLockProvider,
};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let address: SocketAddr = std::env::args()
        .nth(1)
        .as_deref()
        .unwrap_or("127.0.0.1:9464")
        .parse()?;
    // The recorder every shedlock metric goes to, with its HTTP endpoint.
    PrometheusBuilder::new()
        .with_http_listener(address)
        .install()?;
    shedlock::metrics::describe();

    let provider = SqliteLockProvider::connect("sqlite::memory:").await?;
    provider.create_schema().await?;
    let report = Job::new(
        "report",
        Schedule::fixed_rate(Duration::from_secs(1))?,
        |()| async { Ok::<_, std::io::Error>(()) },
    )
    .with_lock(JobLock::new("report")?);
    let import = Job::new(
        "import",
        Schedule::fixed_rate(Duration::from_secs(2))?,
        |()| async { Err::<(), _>(std::io::Error::other("upstream returned 503")) },
    )
    .with_lock(JobLock::new("import")?);
    let scheduler = Scheduler::builder()
        .provider(provider)
        .config(SchedulerConfig::default())
        .registry(JobRegistry::new(()).add(report).add(import))
        .start()
        .await?;
    println!("serving http://{address}/metrics (ctrl-c to stop)");
    scheduler.shutdown_on_signal().await;
    Ok(())
}
