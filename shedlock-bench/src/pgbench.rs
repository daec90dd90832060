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

/// One pgbench run: its rate and the CPU time its client spent per pair.
#[derive(Debug, Clone, Copy)]
pub(crate) struct PgbenchRun {
    pub(crate) pairs_per_sec: f64,
    /// Watched from outside while it runs (start-up and connecting included); 0 if the
    /// process could not be found.
    pub(crate) cpu_us_per_pair: f64,
}

/// Runs the script with `clients` connections for `seconds` (whole, ≥ 1).
pub(crate) async fn run(url: &str, clients: usize, seconds: u64) -> anyhow::Result<PgbenchRun> {
    let seconds = seconds.max(1);
    let child = tokio::process::Command::new("bash")
        .arg(script())
        .arg(without_tls(url))
        .arg(seconds.to_string())
        .arg(clients.to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let watcher = tokio::spawn(watch_cpu(child.id(), stopped));
    let output = child.wait_with_output().await?;
    let _ = stop.send(());
    let cpu = watcher.await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    anyhow::ensure!(
        output.status.success(),
        "pgbench-baseline.sh failed ({}): {}{}",
        output.status,
        stdout,
        String::from_utf8_lossy(&output.stderr)
    );
    // "pgbench clients=N pairs_per_sec=X"
    let pairs_per_sec: f64 = stdout
        .lines()
        .filter_map(|line| line.split_once("pairs_per_sec="))
        .find_map(|(_, value)| value.trim().parse().ok())
        .ok_or_else(|| {
            anyhow::anyhow!("no pairs_per_sec in pgbench-baseline.sh output: {stdout}")
        })?;
    let pairs = pairs_per_sec * seconds as f64;
    Ok(PgbenchRun {
        pairs_per_sec,
        cpu_us_per_pair: if pairs > 0.0 {
            cpu.as_secs_f64() * 1e6 / pairs
        } else {
            0.0
        },
    })
}

/// The CPU time of the `pgbench` process the script (`script_pid`) starts, read from its
/// threads' `schedstat` every 10 ms until `stop`: the last reading before it exits.
async fn watch_cpu(
    script_pid: Option<u32>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> std::time::Duration {
    let Some(script_pid) = script_pid else {
        return std::time::Duration::ZERO;
    };
    let mut pgbench = None;
    let mut last = std::time::Duration::ZERO;
    loop {
        if pgbench.is_none() {
            pgbench = descendant_named(script_pid, "pgbench");
        }
        if let Some(pid) = pgbench {
            let cpu = crate::stats::cpu_of(&format!("/proc/{pid}/task"));
            last = last.max(cpu);
        }
        tokio::select! {
            _ = &mut stop => return last,
            () = tokio::time::sleep(std::time::Duration::from_millis(10)) => {}
        }
    }
}

/// A process started (directly or through subshells) by `ancestor` whose command is `name`,
/// found by scanning `/proc/*/stat` (`/proc/<pid>/task/<pid>/children` needs a kernel option
/// this VM lacks).
fn descendant_named(ancestor: u32, name: &str) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let (comm, mut parent) = comm_and_parent(pid)?;
            if comm != name {
                return None;
            }
            for _ in 0..4 {
                if parent == ancestor {
                    return Some(pid);
                }
                parent = comm_and_parent(parent)?.1;
            }
            None
        })
}

/// A process's command name and parent, from `/proc/<pid>/stat` ("pid (comm) state ppid …").
fn comm_and_parent(pid: u32) -> Option<(String, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (head, rest) = stat.rsplit_once(')')?;
    let comm = head.split_once('(')?.1.to_owned();
    Some((comm, rest.split_whitespace().nth(1)?.parse().ok()?))
}
