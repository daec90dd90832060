//! The metrics example's set-up, scraped over HTTP after a few runs: every figure matches what
//! the scheduler itself reports.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use shedlock::{
    Job, JobLock, JobRegistry, Schedule, Scheduler, SchedulerConfig, sql::SqliteLockProvider,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

const RUNS: usize = 3;

/// `GET /metrics` over plain HTTP/1.0: the body.
async fn scrape(address: SocketAddr) -> String {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("HTTP/1.") && head.contains(" 200 "),
        "{head}"
    );
    body.to_owned()
}

/// The value of the sample `name{labels}`, labels in the exporter's (sorted) order.
fn sample(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("no sample {series} in:\n{text}"))
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_after_a_few_runs_shows_every_run() {
    let address = {
        let free = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        free.local_addr().unwrap()
    };
    PrometheusBuilder::new()
        .with_http_listener(address)
        .install()
        .unwrap();
    shedlock::metrics::describe();

    let provider = SqliteLockProvider::connect("sqlite::memory:")
        .await
        .unwrap();
    provider.create_schema().await.unwrap();
    let (ran, mut runs) = mpsc::unbounded_channel();
    let every = Schedule::fixed_rate(Duration::from_millis(50)).unwrap();
    let (ok, failing) = (ran.clone(), ran);
    let report = Job::new("report", every.clone(), move |()| {
        let _ = ok.send("report");
        async { Ok::<_, std::io::Error>(()) }
    })
    .with_lock(JobLock::new("metrics-report").unwrap());
    let import = Job::new("import", every, move |()| {
        let _ = failing.send("import");
        async { Err::<(), _>(std::io::Error::other("upstream returned 503")) }
    })
    .with_lock(JobLock::new("metrics-import").unwrap());
    let scheduler = Scheduler::builder()
        .provider(provider)
        .config(SchedulerConfig::default())
        .registry(JobRegistry::new(()).add(report).add(import))
        .start()
        .await
        .unwrap();
    let (mut reports, mut imports) = (0, 0);
    while reports < RUNS || imports < RUNS {
        match runs.recv().await.unwrap() {
            "report" => reports += 1,
            _ => imports += 1,
        }
    }
    // Every run that started has ended and been recorded once this returns.
    scheduler.shutdown().await;
    let status = scheduler.status();
    let executions = |job: &str| {
        let job = status.iter().find(|s| s.name == job).unwrap();
        assert_eq!(job.skips + job.store_errors, 0, "{job:?}");
        job.executions as f64
    };
    let (reported, imported) = (executions("report"), executions("import"));
    assert!(reported >= RUNS as f64 && imported >= RUNS as f64);

    let text = scrape(address).await;
    let count = |series: &str| sample(&text, series);
    assert_eq!(
        count(r#"shedlock_job_ticks_total{job="report",outcome="succeeded"}"#),
        reported
    );
    assert_eq!(
        count(r#"shedlock_job_ticks_total{job="import",outcome="failed"}"#),
        imported
    );
    assert_eq!(
        count(r#"shedlock_job_run_duration_seconds_count{job="report"}"#),
        reported
    );
    assert_eq!(count(r#"shedlock_job_running{job="report"}"#), 0.0);
    for (lock, runs) in [("metrics-report", reported), ("metrics-import", imported)] {
        let lock = |name: &str| count(&format!("{name}{{lock=\"{lock}\"}}"));
        assert_eq!(lock("shedlock_lock_acquired_total"), runs);
        assert_eq!(lock("shedlock_lock_acquire_attempts_total"), runs);
        assert_eq!(lock("shedlock_lock_released_total"), runs);
    }
    assert!(text.contains("# HELP shedlock_job_ticks_total Scheduler ticks, by outcome"));
    assert!(!text.contains("shedlock_lock_not_acquired_total"), "{text}");
}
