//! Acquire + release pairs per second: our providers as `connect(url)` sets them up (the
//! default path) against the same statements through a bare sqlx loop on connections of its
//! own, and (PostgreSQL) against pgbench; our providers on a pool only against the bare loop on
//! the same pool. Runs of the clients interleaved (A B C, then C B A, …), medians reported.
//! Uncontended, a pair counts when its lock was taken (an attempt SQLite answered "busy" did
//! no work); contended, every attempt counts.

mod report;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shedlock::{LockConfiguration, LockProvider};

use crate::db::{Databases, Db, PoolKind};
use crate::raw::{LEASE, RawSql, Source};
use crate::stats::process_cpu;
use crate::{Settings, pgbench};
pub(crate) use report::Ratios;
use report::{Series, report};

const TABLE: &str = "shedlock_bench";

/// Each worker on a lock name of its own, or all on one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Uncontended,
    Contended,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Uncontended => "uncontended",
            Mode::Contended => "contended",
        }
    }
}

/// Who sends the statements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    /// Our provider as `connect(url)` sets it up: its own connections (as many as the pool's
    /// `max_connections`), the README's path.
    Provider,
    /// Our provider on the tuned pool with `dedicated_connections(0)`: a checkout per statement.
    ProviderPooled,
    /// Our provider as `connect(url)` sets it up, with `dedicated_connections(workers)`: as many
    /// connections as the bare loop and pgbench (only with `--clients`).
    ProviderPerWorker,
    /// The bare loop, each worker on a connection of its own (no pool at all).
    Raw,
    /// The bare loop on the tuned pool, a checkout per statement.
    RawPooled,
}

impl Client {
    fn label(self) -> &'static str {
        match self {
            Client::Provider => "ours",
            Client::Raw => "raw",
            Client::ProviderPooled => "ours-pool",
            Client::ProviderPerWorker => "ours-per-worker",
            Client::RawPooled => "raw-pool",
        }
    }
}

/// One timed run.
#[derive(Debug, Clone, Copy, Default)]
struct Run {
    pairs_per_sec: f64,
    cpu_us_per_pair: f64,
    acquired_share: f64,
    /// Every attempt of the run, warm-up included, acquired or not (to divide `strace -c`
    /// counts by).
    total_pairs: u64,
}

/// What the workers share.
#[derive(Debug, Default)]
struct Control {
    stop: AtomicBool,
    pairs: AtomicU64,
    acquired: AtomicU64,
    errors: AtomicU64,
    first_error: Mutex<Option<String>>,
}

impl Control {
    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    async fn record<E: std::fmt::Display>(&self, outcome: Result<bool, E>) {
        match outcome {
            Ok(acquired) => {
                self.pairs.fetch_add(1, Ordering::Relaxed);
                self.acquired
                    .fetch_add(u64::from(acquired), Ordering::Relaxed);
            }
            Err(error) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                self.first_error
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert_with(|| error.to_string());
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        }
    }
}

/// The lock name of worker `i` of a client.
fn lock_name(client: Client, mode: Mode, i: usize) -> String {
    match mode {
        Mode::Uncontended => format!("{}-{i}", client.label()),
        Mode::Contended => format!("{}-shared", client.label()),
    }
}

/// One run of `client`: connect, warm up, measure, stop, close.
async fn run_once(
    dbs: &Databases,
    db: Db,
    client: Client,
    workers: usize,
    mode: Mode,
    sql: &Arc<RawSql>,
    settings: &Settings,
) -> anyhow::Result<Run> {
    let control = Arc::new(Control::default());
    let mut pool = None;
    let mut provider: Option<Arc<dyn LockProvider>> = None;
    let mut handles = Vec::with_capacity(workers);
    for i in 0..workers {
        let (control, name) = (Arc::clone(&control), lock_name(client, mode, i));
        let handle = match client {
            Client::Provider | Client::ProviderPooled | Client::ProviderPerWorker => {
                if provider.is_none() {
                    // One provider for all workers, as one instance of a service has.
                    let (kind, dedicated) = match client {
                        Client::Provider => (PoolKind::ProviderConnect, None),
                        Client::ProviderPerWorker => (PoolKind::ProviderConnect, Some(workers)),
                        _ => (PoolKind::Tuned, Some(0)),
                    };
                    let on = dbs.pool(db, kind, workers).await?;
                    provider = Some(on.provider(TABLE, "bench-ours", dedicated)?);
                    pool = Some(on);
                }
                let provider = provider
                    .clone()
                    .ok_or_else(|| anyhow::anyhow!("no provider"))?;
                let config = LockConfiguration::new(name, LEASE, Duration::ZERO)?;
                tokio::spawn(async move {
                    while !control.stopped() {
                        let outcome = match provider.acquire(&config).await {
                            Ok(Some(lease)) => provider.release(&lease).await.map(|_| true),
                            Ok(None) => Ok(false),
                            Err(error) => Err(error),
                        };
                        control.record(outcome).await;
                    }
                    None
                })
            }
            Client::Raw | Client::RawPooled => {
                let mut source = match client {
                    Client::RawPooled => {
                        if pool.is_none() {
                            pool = Some(dbs.pool(db, PoolKind::Tuned, workers).await?);
                        }
                        Source::Pool(pool.clone().ok_or_else(|| anyhow::anyhow!("no pool"))?)
                    }
                    _ => Source::Dedicated(dbs.dedicated(db).await?),
                };
                let sql = Arc::clone(sql);
                tokio::spawn(async move {
                    while !control.stopped() {
                        let outcome = sql.pair(&mut source, &name, "bench-raw").await;
                        control.record(outcome).await;
                    }
                    match source {
                        Source::Dedicated(connection) => Some(connection),
                        Source::Pool(_) => None,
                    }
                })
            }
        };
        handles.push(handle);
    }

    tokio::time::sleep(settings.warmup).await;
    let (pairs_0, acquired_0) = (
        control.pairs.load(Ordering::Relaxed),
        control.acquired.load(Ordering::Relaxed),
    );
    let (cpu_0, start) = (process_cpu(), Instant::now());
    tokio::time::sleep(settings.run).await;
    let (pairs_1, acquired_1) = (
        control.pairs.load(Ordering::Relaxed),
        control.acquired.load(Ordering::Relaxed),
    );
    let (cpu_1, elapsed) = (process_cpu(), start.elapsed());
    control.stop.store(true, Ordering::Relaxed);
    for handle in handles {
        if let Some(connection) = handle.await? {
            connection.close().await?;
        }
    }
    // Dropped first: its dedicated connections are closed with it.
    drop(provider);
    if let Some(pool) = pool {
        pool.close().await;
    }
    let errors = control.errors.load(Ordering::Relaxed);
    if errors > 0 {
        let first = control
            .first_error
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        eprintln!(
            "  warning: db={} client={} workers={workers} mode={}: {errors} errors, first: {}",
            db.name(),
            client.label(),
            mode.name(),
            first.unwrap_or_default()
        );
    }
    let (attempts, acquired) = ((pairs_1 - pairs_0) as f64, (acquired_1 - acquired_0) as f64);
    // Uncontended, every attempt should take its lock: one that did not (SQLite's file was
    // busy) did no work and is not counted. Contended, "taken by another" is the work.
    let pairs = match mode {
        Mode::Uncontended => acquired,
        Mode::Contended => attempts,
    };
    Ok(Run {
        pairs_per_sec: pairs / elapsed.as_secs_f64(),
        cpu_us_per_pair: if pairs > 0.0 {
            (cpu_1 - cpu_0).as_secs_f64() * 1e6 / pairs
        } else {
            0.0
        },
        acquired_share: if attempts > 0.0 {
            acquired / attempts
        } else {
            0.0
        },
        total_pairs: control.pairs.load(Ordering::Relaxed),
    })
}

/// The clients of a case, in the order they run in each round: all of them with `--clients`,
/// else all but `ours-per-worker`.
fn clients(chosen: Option<&[String]>) -> Vec<Client> {
    let all = [
        Client::Provider,
        Client::Raw,
        Client::ProviderPooled,
        Client::RawPooled,
        Client::ProviderPerWorker,
    ];
    match chosen {
        Some(chosen) => all
            .into_iter()
            .filter(|c| chosen.iter().any(|o| o == c.label()))
            .collect(),
        None => all[..4].to_vec(),
    }
}

/// Every case on `databases`; returns each case's ratios.
pub(crate) async fn run(
    dbs: &Databases,
    databases: &[Db],
    settings: &Settings,
) -> anyhow::Result<Vec<Ratios>> {
    let mut all = Vec::new();
    let with_pgbench = pgbench::available();
    if !with_pgbench {
        println!(
            "# pgbench-baseline.sh not found: set SHEDLOCK_PGBENCH_SCRIPT; pgbench lines skipped"
        );
    }
    for &db in databases {
        let setup = dbs.pool(db, PoolKind::Tuned, 1).await?;
        setup.create_schema(TABLE).await?;
        // Leases left by an interrupted run (300 s) would turn "uncontended" into "held".
        setup.execute(format!("DELETE FROM {TABLE}")).await?;
        let sql = Arc::new(RawSql::capture(db, &setup, TABLE).await?);
        setup.close().await;
        println!(
            "# db={} statements of a pair (ours and raw):\n  {}",
            db.name(),
            sql.describe()
        );
        for mode in [Mode::Uncontended, Mode::Contended] {
            if settings
                .mode
                .as_deref()
                .is_some_and(|only| only != mode.name())
            {
                continue;
            }
            for &workers in &settings.workers {
                let clients = clients(settings.clients.as_deref());
                let pgbench = with_pgbench && db == Db::Postgres && mode == Mode::Uncontended;
                let mut series: Vec<Series> = clients.iter().map(|_| Series::default()).collect();
                let mut pgbench_runs = Vec::new();
                let seconds = settings.run.as_secs_f64().round() as u64;
                for rep in 0..settings.reps {
                    // A B C pgbench, then pgbench C B A, …: neighbours in time get compared.
                    let forward = rep % 2 == 0;
                    if pgbench && !forward {
                        pgbench_runs.push(pgbench::run(&dbs.postgres, workers, seconds).await?);
                    }
                    let mut order: Vec<usize> = (0..clients.len()).collect();
                    if !forward {
                        order.reverse();
                    }
                    for i in order {
                        let run = run_once(dbs, db, clients[i], workers, mode, &sql, settings);
                        series[i].0.push(run.await?);
                    }
                    if pgbench && forward {
                        pgbench_runs.push(pgbench::run(&dbs.postgres, workers, seconds).await?);
                    }
                }
                let case = format!("db={} workers={workers} mode={}", db.name(), mode.name());
                let pgbench_runs = pgbench.then_some(&pgbench_runs[..]);
                all.push(report(&case, &clients, &series, pgbench_runs));
            }
        }
    }
    Ok(all)
}
