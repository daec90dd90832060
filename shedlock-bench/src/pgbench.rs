//! PostgreSQL's own ceiling: `shared/bench/pgbench-baseline.sh` (pgbench running the same
//! acquire and release statements), run as it is.

use std::path::PathBuf;

/// The script: `SHEDLOCK_PGBENCH_SCRIPT`, or `shared/bench/pgbench-baseline.sh` beside the
/// repository.
fn script() -> PathBuf {
    std::env::var_os("SHEDLOCK_PGBENCH_SCRIPT").map_or_else(
        || {
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../shared/bench/pgbench-baseline.sh"
            ))
        },
        PathBuf::from,
    )
}

/// Whether the script is there to run.
pub(crate) fn available() -> bool {
    script().is_file()
}

/// `url` without TLS: libpq (pgbench) uses TLS when the server offers it, sqlx as built here
/// (no TLS feature) never does, and the ceiling must be measured over the same transport.
fn without_tls(url: &str) -> String {
    if url.contains("sslmode=") {
        url.to_owned()
    } else if url.contains('?') {
        format!("{url}&sslmode=disable")
    } else {
        format!("{url}?sslmode=disable")
    }
}

/// Pairs per second pgbench reaches with `clients` connections in `seconds` (whole, ≥ 1).
pub(crate) async fn pairs_per_sec(url: &str, clients: usize, seconds: u64) -> anyhow::Result<f64> {
    let output = tokio::process::Command::new("bash")
        .arg(script())
        .arg(without_tls(url))
        .arg(seconds.max(1).to_string())
        .arg(clients.to_string())
        .kill_on_drop(true)
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(
        output.status.success(),
        "pgbench-baseline.sh failed ({}): {}{}",
        output.status,
        stdout,
        String::from_utf8_lossy(&output.stderr)
    );
    // "pgbench clients=N pairs_per_sec=X"
    stdout
        .lines()
        .filter_map(|line| line.split_once("pairs_per_sec="))
        .find_map(|(_, value)| value.trim().parse().ok())
        .ok_or_else(|| anyhow::anyhow!("no pairs_per_sec in pgbench-baseline.sh output: {stdout}"))
}
