//! Fleet scale (issue 16): K instances, each an OS process (this binary re-executed as
//! `fleet-instance`) running the real `Scheduler` with M locked jobs on `* * * * * *`, all on
//! one lock table, for a window of W whole seconds. Per configuration: how many (job, tick)
//! pairs ran exactly once, statements sent per tick, database CPU, instance CPU and memory,
//! and tick-start latency.
//!
//! A run is attributed to its tick: the fire time the job reads from its `RunContext`, so a
//! tick run twice is a duplicate (never a late start counted in the next second), and a
//! tick's latency is its start less its fire time.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock::{Job, JobLock, JobRegistry, RunContext, Schedule, Scheduler, SchedulerConfig};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};

use crate::db::{Databases, Db, Pool, PoolKind};
use crate::proc_status::status_kib;
use crate::stats::{cpu_of, median, percentile, process_cpu};

/// The lock table of this benchmark, so it never meets another run's rows.
const TABLE: &str = "shedlock_fleet";
/// Connections of their own that the instances may open together on PostgreSQL and MariaDB:
/// the default (32 per instance) times ten instances would exceed the shared PostgreSQL's
/// `max_connections` (100) and fail other people's tests, so each instance gets its share,
/// at most the default.
const FLEET_CONNECTIONS: usize = 60;
/// The provider's default number of dedicated connections.
const DEFAULT_CONNECTIONS: usize = 32;
/// Where an instance finds its database's URL.
const URL_VARIABLE: &str = "SHEDLOCK_FLEET_URL";
/// Seconds between the last instance being ready and the window's first tick.
const SETTLE_SECONDS: u64 = 2;

/// The configurations measured: instance counts × job counts, on every database alike (since
/// a tick's claims, run records and releases are batched, MariaDB and SQLite take the largest
/// fleet too).
pub(crate) fn matrix(instances: &[usize], jobs: &[usize]) -> Vec<(usize, usize)> {
    instances
        .iter()
        .flat_map(|&k| jobs.iter().map(move |&m| (k, m)))
        .collect()
}

/// Runs every configuration of `matrix` on each database, printing a `fleet` line per
/// configuration.
pub(crate) async fn run(
    dbs: &Databases,
    databases: &[Db],
    instances: &[usize],
    jobs: &[usize],
    window: u64,
    mode: Mode,
) -> anyhow::Result<()> {
    println!(
        "# fleet: instances as processes, each a Scheduler with M jobs `* * * * * *` ({}) \
         on table {TABLE}, window {window} s",
        match mode {
            Mode::Lock => "each under a lock, lock_at_least_for 500ms, lock_at_most_for 10s",
            Mode::Leader => "leader_only, one election, default ElectionConfig",
        }
    );
    for &db in databases {
        for (k, m) in matrix(instances, jobs) {
            let result = configuration(dbs, db, k, m, window, mode).await?;
            println!("{result}");
        }
    }
    Ok(())
}

/// How the jobs are kept to one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Each run under its job's lock (the default).
    Lock,
    /// `leader_only`: the instance leading one election runs every job, without locks.
    Leader,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Lock => "lock",
            Mode::Leader => "leader",
        }
    }
}

impl std::str::FromStr for Mode {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s {
            "lock" => Ok(Mode::Lock),
            "leader" => Ok(Mode::Leader),
            _ => anyhow::bail!("unknown fleet mode {s:?}: lock or leader"),
        }
    }
}

/// What one configuration measured.
#[derive(Debug)]
struct FleetResult {
    db: Db,
    mode: Mode,
    instances: usize,
    jobs: usize,
    ticks: usize,
    exactly_once: usize,
    never: usize,
    twice_or_more: usize,
    statements_per_tick: f64,
    table_index_scans_per_tick: Option<f64>,
    rows_written_per_tick: Option<f64>,
    db_cpu_percent: f64,
    instance_cpu_percent: f64,
    instance_rss_mb: f64,
    instance_hwm_mb: f64,
    latency_median_ms: f64,
    latency_p99_ms: f64,
    connections: usize,
    missed: u64,
    overlapped: u64,
    store_errors: u64,
}

impl std::fmt::Display for FleetResult {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let opt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.1}"));
        write!(
            f,
            "fleet db={} mode={} instances={} jobs={} ticks={} exactly_once={} never={} twice={} \
             statements_per_tick={:.1} table_index_scans_per_tick={} rows_written_per_tick={} \
             db_cpu_percent={:.1} instance_cpu_percent={:.1} instance_rss_mb={:.1} \
             instance_hwm_mb={:.1} latency_median_ms={:.1} latency_p99_ms={:.1} \
             connections_per_instance={} missed={} overlapped={} store_errors={}",
            self.db.name(),
            self.mode.name(),
            self.instances,
            self.jobs,
            self.ticks,
            self.exactly_once,
            self.never,
            self.twice_or_more,
            self.statements_per_tick,
            opt(self.table_index_scans_per_tick),
            opt(self.rows_written_per_tick),
            self.db_cpu_percent,
            self.instance_cpu_percent,
            self.instance_rss_mb,
            self.instance_hwm_mb,
            self.latency_median_ms,
            self.latency_p99_ms,
            self.connections,
            self.missed,
            self.overlapped,
            self.store_errors,
        )
    }
}

/// One instance's report, read from its standard output.
#[derive(Debug, Default)]
struct Report {
    /// Per wall second of the sample: (statements so far, CPU so far, resident KiB).
    samples: HashMap<u64, (u64, Duration, u64)>,
    /// (job, tick (fire time), start), in µs since the epoch.
    runs: Vec<(usize, u64, u64)>,
    missed: u64,
    overlapped: u64,
    store_errors: u64,
    hwm_kib: u64,
}

struct Instance {
    child: Child,
    stdin: Option<ChildStdin>,
    report: tokio::task::JoinHandle<anyhow::Result<Report>>,
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

/// Sleeps until `micros` since the epoch on the wall clock.
async fn sleep_until_wall(micros: u64) {
    let now = now_micros();
    if micros > now {
        tokio::time::sleep(Duration::from_micros(micros - now)).await;
    }
}

async fn configuration(
    dbs: &Databases,
    db: Db,
    k: usize,
    m: usize,
    window: u64,
    mode: Mode,
) -> anyhow::Result<FleetResult> {
    let admin = dbs.pool(db, PoolKind::Tuned, 1).await?;
    admin
        .execute(format!("DROP TABLE IF EXISTS {TABLE}"))
        .await?;
    admin.create_schema(TABLE).await?;
    let application = format!("shedlock-fleet-{}", std::process::id());
    let url = match db {
        Db::Postgres => {
            let separator = if dbs.postgres.contains('?') { '&' } else { '?' };
            format!("{}{separator}application_name={application}", dbs.postgres)
        }
        _ => dbs.url(db),
    };

    let mut instances = Vec::with_capacity(k);
    let mut ready = Vec::with_capacity(k);
    for _ in 0..k {
        let (instance, is_ready) = spawn(db, &url, m, connections_per_instance(db, k), mode)?;
        instances.push(instance);
        ready.push(is_ready);
    }
    for is_ready in ready {
        tokio::time::timeout(Duration::from_secs(60), is_ready)
            .await
            .map_err(|_| anyhow::anyhow!("an instance did not start within 60 s"))?
            .map_err(|_| anyhow::anyhow!("an instance ended before it was ready"))??;
    }
    // The window's ticks are the whole seconds first..first + window; the counters are read
    // half a second before the first and half a second before the one after the last.
    let first = now_micros() / 1_000_000 + 1 + SETTLE_SECONDS;
    let end = first + window;
    sleep_until_wall(first * 1_000_000 - 500_000).await;
    let db_before = DbCounters::read(&admin, db, &application).await;
    sleep_until_wall(end * 1_000_000 - 500_000).await;
    let db_after = DbCounters::read(&admin, db, &application).await;
    // The last tick's runs are recorded once they start; give them a second and a half.
    sleep_until_wall(end * 1_000_000 + 1_500_000).await;

    let mut reports = Vec::with_capacity(k);
    for mut instance in instances {
        drop(instance.stdin.take()); // end of input: shut down and report
        let report = tokio::time::timeout(Duration::from_secs(120), &mut instance.report).await;
        let report = match report {
            Ok(report) => report??,
            Err(_) => {
                let _ = instance.child.kill().await;
                anyhow::bail!("an instance did not finish within 120 s of its shutdown")
            }
        };
        instance.child.wait().await?;
        reports.push(report);
    }
    admin
        .execute(format!("DROP TABLE IF EXISTS {TABLE}"))
        .await?;
    admin.close().await;
    let mut result = summarize(db, k, m, first, window, &reports, &db_before, &db_after);
    result.mode = mode;
    Ok(result)
}

#[allow(clippy::too_many_arguments)] // one configuration's parts, used once
fn summarize(
    db: Db,
    k: usize,
    m: usize,
    first: u64,
    window: u64,
    reports: &[Report],
    db_before: &DbCounters,
    db_after: &DbCounters,
) -> FleetResult {
    let seconds = usize::try_from(window).unwrap_or(usize::MAX);
    let mut counts = vec![0u32; m * seconds];
    let mut latencies = Vec::new();
    for &(job, tick, start) in reports.iter().flat_map(|r| &r.runs) {
        let second = tick / 1_000_000;
        if (first..first + window).contains(&second) && job < m {
            let index = usize::try_from(second - first).unwrap_or(usize::MAX);
            counts[job * seconds + index] += 1;
            latencies.push(start.saturating_sub(tick) as f64 / 1000.0);
        }
    }
    let ticks = counts.len();
    let window_secs = window as f64;
    let sample = |r: &Report, second: u64| r.samples.get(&second).copied();
    let (mut statements, mut cpu, mut rss) = (0u64, Vec::new(), Vec::new());
    for report in reports {
        if let (Some(before), Some(after)) = (
            sample(report, first - 1),
            sample(report, end_sample(first, window)),
        ) {
            statements += after.0.saturating_sub(before.0);
            cpu.push(after.1.saturating_sub(before.1).as_secs_f64() / window_secs * 100.0);
            rss.push(after.2 as f64 / 1024.0);
        }
    }
    let per_tick = |v: u64| v as f64 / window_secs;
    FleetResult {
        db,
        mode: Mode::Lock,
        instances: k,
        jobs: m,
        ticks,
        exactly_once: counts.iter().filter(|&&c| c == 1).count(),
        never: counts.iter().filter(|&&c| c == 0).count(),
        twice_or_more: counts.iter().filter(|&&c| c > 1).count(),
        statements_per_tick: per_tick(statements),
        table_index_scans_per_tick: db_after
            .index_scans
            .zip(db_before.index_scans)
            .map(|(a, b)| per_tick(a.saturating_sub(b))),
        rows_written_per_tick: db_after
            .rows_written
            .zip(db_before.rows_written)
            .map(|(a, b)| per_tick(a.saturating_sub(b))),
        db_cpu_percent: db_after.cpu_since(db_before).as_secs_f64() / window_secs * 100.0,
        instance_cpu_percent: median(&cpu),
        instance_rss_mb: median(&rss),
        instance_hwm_mb: reports
            .iter()
            .map(|r| r.hwm_kib as f64 / 1024.0)
            .fold(0.0, f64::max),
        latency_median_ms: median(&latencies),
        latency_p99_ms: percentile(&latencies, 99.0),
        connections: connections_per_instance(db, k),
        missed: reports.iter().map(|r| r.missed).sum(),
        overlapped: reports.iter().map(|r| r.overlapped).sum(),
        store_errors: reports.iter().map(|r| r.store_errors).sum(),
    }
}

/// Dedicated connections per instance: the provider's default, or the instance's share of
/// [`FLEET_CONNECTIONS`]; SQLite's default is 4 (one writer at a time).
fn connections_per_instance(db: Db, instances: usize) -> usize {
    match db {
        Db::Sqlite => 4,
        _ => (FLEET_CONNECTIONS / instances.max(1)).min(DEFAULT_CONNECTIONS),
    }
}

/// The sample taken half a second before the tick after the window's last.
fn end_sample(first: u64, window: u64) -> u64 {
    first + window - 1
}

/// Starts one instance; the second value resolves once its scheduler runs.
fn spawn(
    db: Db,
    url: &str,
    jobs: usize,
    connections: usize,
    mode: Mode,
) -> anyhow::Result<(Instance, tokio::sync::oneshot::Receiver<anyhow::Result<()>>)> {
    let mut child = Command::new(std::env::current_exe()?)
        .args(["fleet-instance", db.name()])
        .env(URL_VARIABLE, url)
        .args([jobs.to_string(), connections.to_string()])
        .arg(mode.name())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdin = child.stdin.take();
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel();
    let report = tokio::spawn(read_report(BufReader::new(stdout), ready_tx));
    Ok((
        Instance {
            child,
            stdin,
            report,
        },
        ready_rx,
    ))
}

async fn read_report(
    stdout: BufReader<tokio::process::ChildStdout>,
    ready: tokio::sync::oneshot::Sender<anyhow::Result<()>>,
) -> anyhow::Result<Report> {
    let mut ready = Some(ready);
    let mut report = Report::default();
    let mut lines = stdout.lines();
    while let Some(line) = lines.next_line().await? {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let number = |i: usize| -> anyhow::Result<u64> {
            Ok(fields
                .get(i)
                .ok_or_else(|| anyhow::anyhow!("short line from an instance: {line:?}"))?
                .parse()?)
        };
        match fields.first().copied() {
            Some("ready") => {
                if let Some(ready) = ready.take() {
                    let _ = ready.send(Ok(()));
                }
            }
            Some("sample") => {
                let cpu = Duration::from_nanos(number(3)?);
                report
                    .samples
                    .insert(number(1)?, (number(2)?, cpu, number(4)?));
            }
            Some("run") => {
                report
                    .runs
                    .push((usize::try_from(number(1)?)?, number(2)?, number(3)?));
            }
            Some("status") => {
                report.missed += number(1)?;
                report.overlapped += number(2)?;
                report.store_errors += number(3)?;
            }
            Some("hwm") => report.hwm_kib = number(1)?,
            _ => anyhow::bail!("unexpected line from an instance: {line:?}"),
        }
    }
    if let Some(ready) = ready.take() {
        let _ = ready.send(Err(anyhow::anyhow!(
            "an instance exited before it was ready"
        )));
    }
    Ok(report)
}

/// The database's side of a window.
#[derive(Debug, Default)]
struct DbCounters {
    /// CPU time so far per server process (PostgreSQL: the fleet's backends; MariaDB: the
    /// server, whoever it serves; SQLite: none, it runs inside the instances).
    cpu: HashMap<u32, Duration>,
    /// PostgreSQL: index scans on the lock table (one per lock statement).
    index_scans: Option<u64>,
    /// PostgreSQL: rows inserted and updated in the lock table.
    rows_written: Option<u64>,
}

impl DbCounters {
    async fn read(admin: &Pool, db: Db, application: &str) -> Self {
        let mut counters = DbCounters::default();
        match admin {
            Pool::Pg(pool) => {
                let pids: Vec<i32> = sqlx::query_scalar(
                    "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
                )
                .bind(application)
                .fetch_all(pool)
                .await
                .unwrap_or_default();
                for pid in pids {
                    let pid = pid.unsigned_abs();
                    if let Some(cpu) = cpu_of(&format!("/proc/{pid}/task")) {
                        counters.cpu.insert(pid, cpu);
                    }
                }
                // Backends send their table statistics at most once a second when idle, so
                // these lag the window by up to about a second at either end.
                let row: Option<(i64, i64)> = sqlx::query_as(
                    "SELECT coalesce(idx_scan, 0), n_tup_ins + n_tup_upd \
                     FROM pg_stat_user_tables WHERE relname = $1",
                )
                .bind(TABLE)
                .fetch_optional(pool)
                .await
                .ok()
                .flatten();
                if let Some((scans, rows)) = row {
                    counters.index_scans = u64::try_from(scans).ok();
                    counters.rows_written = u64::try_from(rows).ok();
                }
            }
            Pool::My(_) if db == Db::Mysql => {
                for pid in pids_named(&["mariadbd", "mysqld"]) {
                    if let Some(cpu) = cpu_of(&format!("/proc/{pid}/task")) {
                        counters.cpu.insert(pid, cpu);
                    }
                }
            }
            _ => {}
        }
        counters
    }

    /// CPU used between `before` and this reading by the processes present in this one.
    fn cpu_since(&self, before: &DbCounters) -> Duration {
        self.cpu
            .iter()
            .map(|(pid, cpu)| cpu.saturating_sub(before.cpu.get(pid).copied().unwrap_or_default()))
            .sum()
    }
}

/// Processes whose command name is one of `names`.
fn pids_named(names: &[&str]) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            names.contains(&comm.trim()).then_some(pid)
        })
        .collect()
}

/// Statements sent, counted from sqlx's statement log (`tracing` target `sqlx::query`).
static STATEMENTS: AtomicU64 = AtomicU64::new(0);

struct StatementCounter;

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for StatementCounter {
    fn on_event(&self, _: &tracing::Event<'_>, _: tracing_subscriber::layer::Context<'_, S>) {
        STATEMENTS.fetch_add(1, Ordering::Relaxed);
    }
}

/// The child: `fleet-instance <db> <jobs> <connections> <lock|leader>`, the database's URL in
/// [`URL_VARIABLE`] (so that a password stays out of the process list). Prints `ready`, a
/// `sample` line half a second after every whole second, and after its standard input
/// closes, shuts down and prints its `run`s, a `status` line and its `hwm`.
pub(crate) async fn instance(
    db: Db,
    jobs: usize,
    connections: usize,
    mode: Mode,
) -> anyhow::Result<()> {
    use tracing_subscriber::Layer;
    use tracing_subscriber::layer::SubscriberExt;

    let url = std::env::var(URL_VARIABLE)
        .map_err(|_| anyhow::anyhow!("fleet-instance needs {URL_VARIABLE}"))?;
    let counter = StatementCounter.with_filter(tracing_subscriber::filter::filter_fn(|meta| {
        meta.target() == "sqlx::query"
    }));
    let errors = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(tracing_subscriber::filter::LevelFilter::ERROR);
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry().with(counter).with(errors),
    )?;

    let pool = Pool::provider_connect(db, &url).await?;
    let provider = pool.provider(
        TABLE,
        shedlock::provider::default_holder(),
        Some(connections),
    )?;
    let runs: Arc<Mutex<Vec<(usize, u64, u64)>>> = Arc::default();
    let mut registry = JobRegistry::new(Arc::clone(&runs));
    for job in 0..jobs {
        let name = format!("fleet-{job}");
        let lock = JobLock::new(name.clone())?
            .lock_at_most_for(Duration::from_secs(10))?
            .lock_at_least_for(Duration::from_millis(500))?;
        let job = Job::new(
            name,
            Schedule::cron("* * * * * *")?,
            move |runs: Arc<Mutex<Vec<(usize, u64, u64)>>>| async move {
                let start = now_micros();
                // Every run of this cron job has its fire time; a run without one would count
                // in no tick's second.
                let tick = RunContext::current()
                    .and_then(|run| run.tick())
                    .and_then(|tick| tick.duration_since(UNIX_EPOCH).ok())
                    .map_or(0, |tick| {
                        u64::try_from(tick.as_micros()).unwrap_or(u64::MAX)
                    });
                runs.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((job, tick, start));
            },
        );
        registry = registry.add(match mode {
            Mode::Lock => job.with_lock(lock),
            Mode::Leader => job.leader_only("shedlock-fleet")?,
        });
    }
    let scheduler = Scheduler::builder()
        .shared_provider(provider)
        .config(SchedulerConfig::default())
        .registry(registry)
        .start()
        .await?;
    println!("ready");

    let sampler = tokio::spawn(async {
        loop {
            let second = now_micros() / 1_000_000;
            sleep_until_wall(second * 1_000_000 + 1_500_000).await;
            println!(
                "sample {} {} {} {}",
                second + 1,
                STATEMENTS.load(Ordering::Relaxed),
                process_cpu().as_nanos(),
                status_kib("VmRSS")
            );
        }
    });
    // Until the parent closes our input.
    let mut sink = Vec::new();
    tokio::io::stdin().read_to_end(&mut sink).await?;
    sampler.abort();
    scheduler.shutdown().await;
    let runs = std::mem::take(&mut *runs.lock().unwrap_or_else(|e| e.into_inner()));
    let mut out = String::with_capacity(runs.len() * 24);
    for (job, tick, start) in runs {
        out.push_str(&format!("run {job} {tick} {start}\n"));
    }
    let (missed, overlapped, store_errors) =
        scheduler.status().iter().fold((0, 0, 0), |(m, o, e), s| {
            (
                m + s.missed_ticks,
                o + s.overlapped_ticks,
                e + s.store_errors,
            )
        });
    out.push_str(&format!(
        "status {missed} {overlapped} {store_errors}\nhwm {}\n",
        status_kib("VmHWM")
    ));
    use std::io::Write;
    std::io::stdout().lock().write_all(out.as_bytes())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(runs: Vec<(usize, u64, u64)>) -> Report {
        Report {
            runs,
            ..Report::default()
        }
    }

    #[test]
    fn each_job_and_second_of_the_window_is_counted() {
        let first = 1_000;
        // A run of the tick at `second`, started `millis` after it.
        let at =
            |second: u64, millis: u64| (second * 1_000_000, second * 1_000_000 + millis * 1000);
        // Job 0: once in each of the three seconds (one run on each instance). Job 1: twice in
        // the first second, never in the second, once in the third; a run before the window
        // and one after it are ignored.
        let reports = [
            report(vec![
                (0, at(first, 5).0, at(first, 5).1),
                (0, at(first + 2, 7).0, at(first + 2, 7).1),
                (1, at(first, 3).0, at(first, 3).1),
            ]),
            report(vec![
                (0, at(first + 1, 9).0, at(first + 1, 9).1),
                (1, at(first, 4).0, at(first, 4).1),
                (1, at(first + 2, 2).0, at(first + 2, 2).1),
                (1, at(first - 1, 1).0, at(first - 1, 1).1),
                (1, at(first + 3, 1).0, at(first + 3, 1).1),
            ]),
        ];
        let none = DbCounters::default();
        let result = summarize(Db::Sqlite, 2, 2, first, 3, &reports, &none, &none);
        assert_eq!(result.ticks, 6);
        assert_eq!(result.exactly_once, 4);
        assert_eq!(result.twice_or_more, 1);
        assert_eq!(result.never, 1);
        assert_eq!(result.latency_median_ms, 4.5);
    }
}
