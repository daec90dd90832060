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
    /// Watched from outside from 200 ms after pgbench started (once it connected) to its last
    /// reading; 0 if the process could not be found.
    pub(crate) cpu_us_per_pair: f64,
}

/// How long after pgbench appears its CPU window opens: it has connected by then.
const CONNECTED_AFTER: std::time::Duration = std::time::Duration::from_millis(200);

/// Runs the script with `clients` connections for `seconds` (whole, ≥ 1), up to three times
/// if it fails (the machine's database is shared: another test may be restarting it).
pub(crate) async fn run(url: &str, clients: usize, seconds: u64) -> anyhow::Result<PgbenchRun> {
    let mut attempt = 1;
    loop {
        match run_once(url, clients, seconds).await {
            Err(error) if attempt < 3 => {
                eprintln!("  warning: pgbench attempt {attempt} failed, retrying: {error}");
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_secs(2)).await;
            }
            result => return result,
        }
    }
}

async fn run_once(url: &str, clients: usize, seconds: u64) -> anyhow::Result<PgbenchRun> {
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
    let (cpu, window) = watcher.await?;
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
    // pgbench's rate leaves out its connecting ("without initial connection time"), and so
    // does the CPU window.
    let pairs = pairs_per_sec * window.as_secs_f64();
    Ok(PgbenchRun {
        pairs_per_sec,
        cpu_us_per_pair: if pairs > 0.0 {
            cpu.as_secs_f64() * 1e6 / pairs
        } else {
            0.0
        },
    })
}

/// The CPU time the `pgbench` process the script (`script_pid`) starts spends from
/// [`CONNECTED_AFTER`] after it appeared to its last reading before it exits, and that window's
/// length: its threads' `schedstat`, read every 10 ms until `stop`.
async fn watch_cpu(
    script_pid: Option<u32>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> (std::time::Duration, std::time::Duration) {
    use std::time::{Duration, Instant};
    let mut pgbench: Option<(u32, Instant)> = None;
    let mut first: Option<(Duration, Instant)> = None;
    let mut last: Option<(Duration, Instant)> = None;
    loop {
        if pgbench.is_none() {
            pgbench = script_pid
                .and_then(|pid| descendant_named(pid, "pgbench"))
                .map(|pid| (pid, Instant::now()));
        }
        if let Some((pid, seen)) = pgbench
            && seen.elapsed() >= CONNECTED_AFTER
            && let Some(cpu) = crate::stats::cpu_of(&format!("/proc/{pid}/task"))
        {
            let reading = (cpu, Instant::now());
            first.get_or_insert(reading);
            // Threads that exit take their time with them: keep the highest reading.
            if last.is_none_or(|(before, _)| cpu >= before) {
                last = Some(reading);
            }
        }
        tokio::select! {
            _ = &mut stop => break,
            () = tokio::time::sleep(Duration::from_millis(10)) => {}
        }
    }
    match (first, last) {
        (Some((cpu_0, t_0)), Some((cpu_1, t_1))) => (cpu_1.saturating_sub(cpu_0), t_1 - t_0),
        _ => (Duration::ZERO, Duration::ZERO),
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
