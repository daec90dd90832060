//! What one worker's acquire + release pairs can reach on each tokio runtime flavour with a
//! PostgreSQL client other than sqlx: the provider's two statements (durations bound as
//! seconds) through a bare tokio-postgres loop on a multi-threaded runtime (two workers) and on
//! a current-thread runtime, against pgbench (`../shared/bench/pgbench-baseline.sh`, one
//! client), in interleaved rounds. It tells whether the one-worker gap to pgbench is the
//! client library's or the runtime's (BENCHMARKS.md, *The run of record*).
//!
//! Run with: `cargo run --release -p shedlock-bench --bin runtime_floor [-- ROUNDS SECONDS]`
//! (defaults 4 rounds of 3 s; `SHEDLOCK_TEST_PG_URL`, else the local default).

use std::time::{Duration, Instant};

// The throughput benchmark's pgbench runner (script path, TLS off, retries) and medians; this
// binary uses part of each.
#[allow(dead_code)]
#[path = "../pgbench.rs"]
mod pgbench;
#[allow(dead_code)]
#[path = "../stats.rs"]
mod stats;

const TABLE: &str = "shedlock_runtime_floor";

/// A bare tokio-postgres loop on both runtime flavours against pgbench, in interleaved rounds.
#[derive(Debug, clap::Parser)]
#[command(name = "runtime_floor")]
struct Args {
    /// Interleaved rounds.
    #[arg(default_value_t = 4)]
    rounds: usize,
    /// Seconds per timed run.
    #[arg(default_value_t = 3)]
    seconds: u64,
}

async fn pairs_per_sec(url: &str, run: Duration) -> anyhow::Result<f64> {
    let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
    let connection = tokio::spawn(connection);
    client
        .batch_execute(&format!(
            "CREATE TABLE IF NOT EXISTS {TABLE} (name VARCHAR(64) PRIMARY KEY, \
             lock_until TIMESTAMP NOT NULL, locked_at TIMESTAMP NOT NULL, \
             locked_by VARCHAR(255) NOT NULL, fencing_token BIGINT NOT NULL DEFAULT 1)"
        ))
        .await?;
    let acquire = client
        .prepare(&format!(
            "INSERT INTO {TABLE} AS l (name, lock_until, locked_at, locked_by, fencing_token) \
             SELECT $1, db.now + make_interval(secs => $3), db.now, $2, 1 \
             FROM (SELECT timezone('utc', clock_timestamp()) AS now) AS db \
             ON CONFLICT (name) DO UPDATE SET lock_until = EXCLUDED.lock_until, \
             locked_at = EXCLUDED.locked_at, locked_by = EXCLUDED.locked_by, \
             fencing_token = GREATEST(l.fencing_token, 0) + 1 \
             WHERE l.lock_until <= EXCLUDED.locked_at AND (l.locked_at IS NULL \
             OR l.locked_at <= EXCLUDED.locked_at - make_interval(secs => $4)) \
             RETURNING fencing_token, locked_at, lock_until"
        ))
        .await?;
    let release = client
        .prepare(&format!(
            "UPDATE {TABLE} AS l SET lock_until = GREATEST(l.locked_at + make_interval(secs => $4), db.now) \
             FROM (SELECT timezone('utc', clock_timestamp()) AS now) AS db \
             WHERE l.name = $1 AND l.locked_by = $2 AND l.fencing_token = $3 \
             AND l.lock_until > db.now RETURNING l.name"
        ))
        .await?;
    // A name of this process's own: an interrupted run leaves a 300 s lease behind.
    let (name, holder) = (format!("floor-{}", std::process::id()), "runtime-floor");
    let name = name.as_str();
    let pair = || async {
        let row = client
            .query_opt(&acquire, &[&name, &holder, &300f64, &0f64])
            .await?
            .ok_or_else(|| anyhow::anyhow!("{name} not acquired"))?;
        let token: i64 = row.get(0);
        client
            .query_opt(&release, &[&name, &holder, &token, &0f64])
            .await?;
        anyhow::Ok(())
    };
    let warm_up = Instant::now();
    while warm_up.elapsed() < Duration::from_millis(250) {
        pair().await?;
    }
    let (start, mut pairs) = (Instant::now(), 0u32);
    while start.elapsed() < run {
        pair().await?;
        pairs += 1;
    }
    let rate = f64::from(pairs) / start.elapsed().as_secs_f64();
    client
        .execute(&format!("DELETE FROM {TABLE} WHERE name = $1"), &[&name])
        .await?;
    drop(client);
    connection.await??;
    Ok(rate)
}

fn on_runtime(multi_thread: bool, url: &str, run: Duration) -> anyhow::Result<f64> {
    let runtime = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    };
    // The loop runs in a spawned task, as the throughput benchmark's workers do (not on the
    // thread that blocks on the runtime).
    let url = url.to_owned();
    runtime
        .block_on(async move { tokio::spawn(async move { pairs_per_sec(&url, run).await }).await? })
}

/// pgbench's pairs per second with one client, as the throughput benchmark runs it.
fn pgbench(url: &str, run: Duration) -> anyhow::Result<f64> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    Ok(runtime
        .block_on(pgbench::run(url, 1, run.as_secs()))?
        .pairs_per_sec)
}

fn main() -> anyhow::Result<()> {
    let url = std::env::var("SHEDLOCK_TEST_PG_URL")
        .unwrap_or_else(|_| "postgres://root@127.0.0.1:5432/test".into());
    let Args { rounds, seconds } = clap::Parser::parse();
    anyhow::ensure!(rounds > 0, "ROUNDS must be at least 1");
    let run = Duration::from_secs(seconds);
    let (mut multi, mut current) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        // Interleaved, the order reversed every other round, so that drift biases no client.
        let (base, m, c) = if round % 2 == 0 {
            let base = pgbench(&url, run)?;
            let m = on_runtime(true, &url, run)?;
            (base, m, on_runtime(false, &url, run)?)
        } else {
            let c = on_runtime(false, &url, run)?;
            let m = on_runtime(true, &url, run)?;
            (pgbench(&url, run)?, m, c)
        };
        println!(
            "round {round} pgbench={base:.0} tokio_postgres_multi_thread={m:.0} tokio_postgres_current_thread={c:.0}"
        );
        multi.push(m / base);
        current.push(c / base);
    }
    println!(
        "runtime-floor workers=1 ratio_to_pgbench multi_thread={:.2} current_thread={:.2}",
        stats::median(&multi),
        stats::median(&current)
    );
    Ok(())
}
