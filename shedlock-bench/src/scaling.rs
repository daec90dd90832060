//! Latency of acquire, extend and release with 10 rows in the lock table and with 100,000:
//! each statement finds its row through the primary key, so the two must look the same.

use std::time::{Duration, Instant};

use shedlock::LockConfiguration;

use crate::db::{Databases, Db, Pool, PoolKind};
use crate::raw::LEASE;
use crate::stats::{median, percentile};

const SMALL: usize = 10;
const LARGE: usize = 100_000;
/// Rows per INSERT while filling.
const BATCH: usize = 1000;

/// Drops and refills `table` with `rows - 1` expired locks (the probe lock makes `rows`).
async fn fill(pool: &Pool, table: &str, rows: usize) -> anyhow::Result<()> {
    pool.execute(format!("DROP TABLE IF EXISTS {table}"))
        .await?;
    pool.create_schema(table).await?;
    let mut next = 0;
    while next < rows - 1 {
        let end = (next + BATCH).min(rows - 1);
        let values: Vec<String> = (next..end)
            .map(|i| {
                format!(
                    "('filler-{i:06}', '2000-01-01 00:00:00.000', '2000-01-01 00:00:00.000', 'filler', 1)"
                )
            })
            .collect();
        pool.execute(format!(
            "INSERT INTO {table} (name, lock_until, locked_at, locked_by, fencing_token) VALUES {}",
            values.join(", ")
        ))
        .await?;
        next = end;
    }
    let analyze = match pool {
        Pool::My(_) => format!("ANALYZE TABLE {table}"),
        _ => format!("ANALYZE {table}"),
    };
    pool.execute(analyze).await
}

/// Microseconds of each operation, per attempt.
#[derive(Debug, Default)]
struct Samples {
    acquire: Vec<f64>,
    extend: Vec<f64>,
    release: Vec<f64>,
}

fn micros(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e6
}

/// Prints the latencies of every database.
pub(crate) async fn run(
    dbs: &Databases,
    databases: &[Db],
    iterations: usize,
) -> anyhow::Result<()> {
    for &db in databases {
        let pool = dbs.pool(db, PoolKind::Tuned, 1).await?;
        let tables = [
            (SMALL, "shedlock_bench_rows_small"),
            (LARGE, "shedlock_bench_rows_large"),
        ];
        let mut providers = Vec::new();
        for (rows, table) in tables {
            fill(&pool, table, rows).await?;
            providers.push(pool.provider(table, "bench-scaling", None)?);
        }
        let config = LockConfiguration::new("scaling-probe", LEASE, Duration::ZERO)?;
        let mut samples = [Samples::default(), Samples::default()];
        // Alternate between the tables in blocks, so drift on the machine hits both alike.
        const BLOCK: usize = 50;
        for block in 0..iterations.div_ceil(BLOCK) + 1 {
            for (provider, samples) in providers.iter().zip(&mut samples) {
                for _ in 0..BLOCK {
                    let start = Instant::now();
                    let lease = provider.acquire(&config).await?;
                    let acquired = micros(start);
                    let lease = lease.ok_or_else(|| anyhow::anyhow!("probe lock not acquired"))?;
                    let start = Instant::now();
                    let lease = provider.extend(&lease, LEASE, Duration::ZERO).await?;
                    let extended = micros(start);
                    let lease = lease.ok_or_else(|| anyhow::anyhow!("probe lock not extended"))?;
                    let start = Instant::now();
                    anyhow::ensure!(provider.release(&lease).await?, "probe lock not released");
                    let released = micros(start);
                    // The first block warms up connections and statement caches.
                    if block > 0 {
                        samples.acquire.push(acquired);
                        samples.extend.push(extended);
                        samples.release.push(released);
                    }
                }
            }
        }
        let small_acquire = median(&samples[0].acquire);
        for ((rows, _), s) in tables.iter().zip(&samples) {
            println!(
                "scaling db={} rows={rows} acquire_median_us={:.0} acquire_p99_us={:.0} \
                 extend_median_us={:.0} release_median_us={:.0} acquire_vs_10_rows={:.2}",
                db.name(),
                median(&s.acquire),
                percentile(&s.acquire, 99.0),
                median(&s.extend),
                median(&s.release),
                median(&s.acquire) / small_acquire
            );
        }
        for (_, table) in tables {
            pool.execute(format!("DROP TABLE IF EXISTS {table}"))
                .await?;
        }
        pool.close().await;
    }
    Ok(())
}
