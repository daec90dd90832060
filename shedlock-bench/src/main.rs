//! Benchmarks of shedlock's SQL providers and leader election (issue 9), and of ZooKeeper
//! (issue 14); results and method in `BENCHMARKS.md`.
//!
//! Run with: `cargo run --release -p shedlock-bench -- all` (about 8½ minutes; `--help` lists
//! the options), or one part:
//! `throughput`, `statements`, `scaling`, `handover`; `redis` (Redis and RedLock;
//! `SHEDLOCK_TEST_REDIS_URL`, `SHEDLOCK_TEST_REDLOCK_URLS`, else the local defaults) and
//! `zookeeper` (`SHEDLOCK_TEST_ZK_URL`) run alone, not in `all`, and so does `fleet` (issue 16:
//! `--instances 2,5,10 --jobs 10,100,1000 --window 12`; memory figures: `--bin memory`). Options: `--db postgres,mysql,sqlite`,
//! `--workers 1,8,32`, `--seconds 0.8` (per timed run), `--reps 4` (interleaved rounds),
//! `--handovers 20`. Databases: `SHEDLOCK_TEST_PG_URL` and `SHEDLOCK_TEST_MYSQL_URL`, else
//! `postgres://root@127.0.0.1:5432/test` and `mysql://root@127.0.0.1:3306/test`; SQLite in a
//! temporary file. PostgreSQL's ceiling comes from `../shared/bench/pgbench-baseline.sh`
//! (or `SHEDLOCK_PGBENCH_SCRIPT`).

mod cli;
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

use clap::Parser as _;

use cli::{Child, Cli, Part, Settings};
use db::Databases;

fn main() -> anyhow::Result<()> {
    // Usage errors exit here, with clap's message and status 2.
    let cli = Cli::parse();
    match cli.child {
        Some(Child::Candidate {
            db,
            url,
            name,
            lease_ms,
            renew_ms,
            retry_ms,
        }) => {
            let timing = [lease_ms, renew_ms, retry_ms].map(std::time::Duration::from_millis);
            return runtime(None)?.block_on(handover::candidate(db, &url, &name, timing));
        }
        Some(Child::ZkCandidate { url, root }) => {
            return runtime(None)?.block_on(zookeeper::child_candidate(&url, &root));
        }
        Some(Child::FleetInstance {
            db,
            jobs,
            connections,
            mode,
        }) => return runtime(None)?.block_on(fleet::instance(db, jobs, connections, mode)),
        None => {}
    }
    let settings = Settings::from_cli(cli)?;
    if settings.part == Part::Zookeeper {
        // ZooKeeper only: no SQL database needed.
        return runtime(settings.threads)?.block_on(zookeeper::run(
            &settings.workers,
            settings.reps,
            settings.warmup,
            settings.run,
            settings.handovers,
        ));
    }
    if settings.part == Part::Redis {
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
    if settings.runs(Part::Statements) {
        statements::run(dbs, &settings.databases).await?;
    }
    if settings.runs(Part::Scaling) {
        scaling::run(dbs, &settings.databases, settings.scaling_iterations).await?;
    }
    if settings.runs(Part::Throughput) {
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
    if settings.runs(Part::Handover) {
        handover::run(dbs, &settings.databases, settings.handovers).await?;
    }
    if settings.runs(Part::Fleet) {
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
