//! Benchmarks of shedlock's SQL providers and leader election (issue 9), and of ZooKeeper
//! (issue 14); results and method in `BENCHMARKS.md`.
//!
//! Run with: `cargo run --release -p shedlock-bench -- all` (about 8½ minutes), or one part:
//! `throughput`, `statements`, `scaling`, `handover`; `redis` (Redis and RedLock;
//! `SHEDLOCK_TEST_REDIS_URL`, `SHEDLOCK_TEST_REDLOCK_URLS`, else the local defaults) and
//! `zookeeper` (`SHEDLOCK_TEST_ZK_URL`) run alone, not in `all`, and so does `fleet` (issue 16:
//! `--instances 2,5,10 --jobs 10,100,1000 --window 12`; memory figures: `--bin memory`). Options: `--db postgres,mysql,sqlite`,
//! `--workers 1,8,32`, `--seconds 0.8` (per timed run), `--reps 4` (interleaved rounds),
//! `--handovers 20`. Databases: `SHEDLOCK_TEST_PG_URL` and `SHEDLOCK_TEST_MYSQL_URL`, else
//! `postgres://root@127.0.0.1:5432/test` and `mysql://root@127.0.0.1:3306/test`; SQLite in a
//! temporary file. PostgreSQL's ceiling comes from `../shared/bench/pgbench-baseline.sh`
//! (or `SHEDLOCK_PGBENCH_SCRIPT`).

mod db;
mod fleet;
mod handover;
mod machine;
mod pgbench;
mod proc_status;
mod raw;
mod redis;
mod scaling;
mod statements;
mod stats;
mod throughput;
mod zookeeper;

use std::time::Duration;

use db::{Databases, Db};

/// What to run and for how long.
#[derive(Debug)]
pub(crate) struct Settings {
    part: String,
    databases: Vec<Db>,
    pub(crate) workers: Vec<usize>,
    /// Only these throughput clients (`ours`, `raw`, `ours-pool`, `raw-pool`), for investigations.
    pub(crate) clients: Option<Vec<String>>,
    /// Only this throughput mode (`uncontended` or `contended`).
    pub(crate) mode: Option<String>,
    /// Tokio worker threads (1: current-thread runtime); default one per core.
    threads: Option<usize>,
    pub(crate) reps: usize,
    pub(crate) warmup: Duration,
    pub(crate) run: Duration,
    handovers: usize,
    scaling_iterations: usize,
    /// Fleet: instance counts, job counts and the window in seconds.
    instances: Vec<usize>,
    jobs: Vec<usize>,
    window: u64,
}

const USAGE: &str = "usage: shedlock-bench [all|throughput|statements|scaling|handover|redis|zookeeper|fleet] \
    [--db postgres,mysql,sqlite] [--workers 1,8,32] [--seconds 0.8] [--reps 4] [--handovers 20] [--clients ours,raw,…] [--mode uncontended|contended] [--threads N] \
    [--instances 2,5,10] [--jobs 10,100,1000] [--window 12] (fleet: --mode lock|leader)";

impl Settings {
    fn parse(mut args: impl Iterator<Item = String>) -> anyhow::Result<Self> {
        let mut settings = Settings {
            part: "all".into(),
            databases: Db::ALL.to_vec(),
            workers: vec![1, 8, 32],
            clients: None,
            mode: None,
            threads: None,
            reps: 4,
            warmup: Duration::from_millis(250),
            run: Duration::from_millis(800),
            handovers: 20,
            scaling_iterations: 1000,
            instances: vec![2, 5, 10],
            jobs: vec![10, 100, 1000],
            window: 12,
        };
        while let Some(arg) = args.next() {
            let mut value = || {
                args.next()
                    .ok_or_else(|| anyhow::anyhow!("{arg} needs a value\n{USAGE}"))
            };
            match arg.as_str() {
                "--db" => settings.databases = list(&value()?)?,
                "--workers" => settings.workers = list(&value()?)?,
                "--clients" => {
                    settings.clients = Some(value()?.split(',').map(str::to_owned).collect())
                }
                "--mode" => settings.mode = Some(value()?),
                "--threads" => settings.threads = Some(value()?.parse()?),
                "--seconds" => settings.run = Duration::from_secs_f64(value()?.parse()?),
                "--reps" => settings.reps = value()?.parse()?,
                "--handovers" => settings.handovers = value()?.parse()?,
                "--instances" => settings.instances = list(&value()?)?,
                "--jobs" => settings.jobs = list(&value()?)?,
                "--window" => settings.window = value()?.parse()?,
                "all" | "throughput" | "statements" | "scaling" | "handover" | "redis"
                | "zookeeper" | "fleet" => settings.part = arg,
                _ => anyhow::bail!("unknown argument {arg:?}\n{USAGE}"),
            }
        }
        Ok(settings)
    }

    /// Whether `part` runs: `all` is everything but the fleet, which runs alone.
    fn runs(&self, part: &str) -> bool {
        (self.part == "all" && part != "fleet") || self.part == part
    }
}

/// A comma-separated list of values.
fn list<T: std::str::FromStr<Err: Into<anyhow::Error>>>(values: &str) -> anyhow::Result<Vec<T>> {
    values
        .split(',')
        .map(|value| value.parse().map_err(Into::into))
        .collect()
}

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1).peekable();
    if args.peek().map(String::as_str) == Some("candidate") {
        let rest: Vec<String> = args.skip(1).collect();
        return runtime(None)?.block_on(handover::candidate(&rest));
    }
    if args.peek().map(String::as_str) == Some("zk-candidate") {
        let rest: Vec<String> = args.skip(1).collect();
        return runtime(None)?.block_on(zookeeper::child_candidate(&rest));
    }
    if args.peek().map(String::as_str) == Some("fleet-instance") {
        let rest: Vec<String> = args.skip(1).collect();
        return runtime(None)?.block_on(fleet::instance(&rest));
    }
    let settings = Settings::parse(args)?;
    if settings.part == "zookeeper" {
        // ZooKeeper only: no SQL database needed.
        return runtime(settings.threads)?.block_on(zookeeper::run(
            &settings.workers,
            settings.reps,
            settings.warmup,
            settings.run,
            settings.handovers,
        ));
    }
    if settings.part == "redis" {
        return runtime(settings.threads)?.block_on(redis::run(&settings));
    }
    statements::install()?;
    let dbs = Databases::from_env()?;
    let result = runtime(settings.threads)?.block_on(run(&dbs, &settings));
    let _ = std::fs::remove_dir_all(dbs.sqlite_file.parent().unwrap_or(&dbs.sqlite_file));
    result
}

/// Tokio's default multi-threaded runtime (a worker per core), or one on `threads` workers
/// (1: the current-thread runtime).
fn runtime(threads: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match threads {
        Some(1) => tokio::runtime::Builder::new_current_thread(),
        _ => tokio::runtime::Builder::new_multi_thread(),
    };
    if let Some(threads) = threads.filter(|&t| t > 1) {
        builder.worker_threads(threads);
    }
    builder.enable_all().build()
}

async fn run(dbs: &Databases, settings: &Settings) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    machine::describe(dbs, &settings.databases).await;
    if settings.runs("statements") {
        statements::run(dbs, &settings.databases).await?;
    }
    if settings.runs("scaling") {
        scaling::run(dbs, &settings.databases, settings.scaling_iterations).await?;
    }
    if settings.runs("throughput") {
        let ratios = throughput::run(dbs, &settings.databases, settings).await?;
        let summaries = [
            (
                "raw_sql",
                0.95,
                ratios.iter().map(|r| Some(r.to_raw)).collect::<Vec<_>>(),
            ),
            (
                "raw_sql_on_a_pool",
                0.95,
                ratios.iter().map(|r| Some(r.pool_to_raw)).collect(),
            ),
            (
                "pgbench",
                0.90,
                ratios.iter().map(|r| r.to_pgbench).collect(),
            ),
            (
                "pgbench_on_a_pool",
                0.90,
                ratios.iter().map(|r| r.pool_to_pgbench).collect(),
            ),
        ];
        for (label, target, values) in summaries {
            let values: Vec<f64> = values.into_iter().flatten().collect();
            if values.is_empty() {
                continue;
            }
            let met = values.iter().filter(|&&r| r >= target).count();
            let min = values.iter().copied().fold(f64::INFINITY, f64::min);
            println!(
                "summary ratio_to_{label}: min={min:.2}, >= {target:.2} in {met} of {} cases",
                values.len()
            );
        }
    }
    if settings.runs("handover") {
        handover::run(dbs, &settings.databases, settings.handovers).await?;
    }
    if settings.runs("fleet") {
        fleet::run(
            dbs,
            &settings.databases,
            &settings.instances,
            &settings.jobs,
            settings.window,
            settings.mode.as_deref().unwrap_or("lock").parse()?,
        )
        .await?;
    }
    println!(
        "# done in {:.0} s; load average now {}",
        started.elapsed().as_secs_f64(),
        machine::load_average()
    );
    Ok(())
}
