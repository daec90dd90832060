//! ZooKeeper: acquire + release pairs per second through `ZkLockProvider` against a bare
//! `zookeeper-client` loop sending the same requests, and `ZkElector` handover (graceful
//! resignation; SIGKILL of a leader in another process).
//!
//! Run with: `cargo run --release -p shedlock-bench -- zookeeper` (needs `SHEDLOCK_TEST_ZK_URL`,
//! e.g. from `eval "$(bash .ci/zookeeper.sh start)"`).

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shedlock::{
    ElectionConfig, LeaderElection, LockConfiguration, LockProvider, zookeeper::ZkElector,
    zookeeper::ZkLockProvider,
};
use shedlock_test_support::throughput::count_pairs;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;
use zookeeper_client::{Acls, Client, CreateMode};

use crate::stats::{median, percentile, process_cpu};

const LEASE: Duration = Duration::from_secs(300);
const STEP_TIMEOUT: Duration = Duration::from_secs(20);
const TIMING: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_secs(3),
    renew_deadline: Duration::from_secs(2),
    retry_period: Duration::from_millis(500),
};

fn url() -> anyhow::Result<String> {
    std::env::var("SHEDLOCK_TEST_ZK_URL").map_err(|_| {
        anyhow::anyhow!("set SHEDLOCK_TEST_ZK_URL (eval \"$(bash .ci/zookeeper.sh start)\")")
    })
}

fn root(part: &str) -> String {
    format!("/shedlock-bench/{part}-{}", std::process::id())
}

/// Throughput and handover; `reps` interleaved rounds of `run` per client and case.
pub(crate) async fn run(
    workers: &[usize],
    reps: usize,
    warmup: Duration,
    run: Duration,
    handovers: usize,
) -> anyhow::Result<()> {
    let url = url()?;
    for &n in workers {
        for contended in [false, true] {
            throughput(&url, n, contended, reps, warmup, run).await?;
        }
    }
    graceful(&url, handovers).await?;
    killed(&url, handovers.min(8)).await?;
    Ok(())
}

/// The same requests as the provider, sent by hand: ensemble time (a write to the clock node)
/// pipelined with a read of the lock node, a compare-and-set write of the lease if it expired
/// (creation on first use), then the release as a compare-and-set write.
async fn bare_pair(client: &Client, clock: &str, lock: &str) {
    let (now, read) = tokio::join!(client.set_data(clock, &[], None), client.get_data(lock));
    let Ok(now) = now.map(|s| s.mtime) else {
        return;
    };
    let lease = |until: i64| format!("holder=bare\nlease_ms=0\nhold_ms=0\nuntil={until}\n");
    let until = now + LEASE.as_millis() as i64;
    let written = match read {
        Ok((data, stat)) => {
            let held_until = std::str::from_utf8(&data)
                .ok()
                .and_then(|t| t.lines().find_map(|l| l.strip_prefix("until=")))
                .and_then(|v| v.parse::<i64>().ok())
                .unwrap_or(0);
            if held_until > now {
                return;
            }
            client
                .set_data(lock, lease(until).as_bytes(), Some(stat.version))
                .await
        }
        Err(_) => {
            let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
            client
                .create(lock, lease(until).as_bytes(), &persistent)
                .await
                .map(|(stat, _)| stat)
        }
    };
    if let Ok(stat) = written {
        let _ = client
            .set_data(lock, lease(now).as_bytes(), Some(stat.version))
            .await;
    }
}

async fn throughput(
    url: &str,
    workers: usize,
    contended: bool,
    reps: usize,
    warmup: Duration,
    window: Duration,
) -> anyhow::Result<()> {
    let mode = if contended {
        "contended"
    } else {
        "uncontended"
    };
    let root = root(&format!("throughput-{workers}-{mode}"));
    let provider = ZkLockProvider::builder(url).root(&root).connect().await?;
    provider.create_schema().await?;
    let bare = Arc::new(Client::connect(url).await?);
    let clock = format!("{root}/clock");
    let lock_name = move |w: usize| {
        if contended {
            "contended".to_owned()
        } else {
            format!("lock-{w}")
        }
    };
    let (mut ours, mut raw, mut ratios, mut cpu) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for rep in 0..reps {
        let mut round = [(0.0, 0.0); 2];
        // A B, then B A: neighbours in time share the machine's drift.
        let order = if rep % 2 == 0 { [0, 1] } else { [1, 0] };
        for client in order {
            // `workers` tasks looping acquire + release for `window` after `warmup`.
            let counted = if client == 0 {
                let provider = provider.clone();
                count_pairs(workers, warmup, window, process_cpu, move |w| {
                    let provider = provider.clone();
                    let config = LockConfiguration::new(lock_name(w), LEASE, Duration::ZERO)
                        .expect("valid configuration");
                    async move {
                        if let Ok(Some(lease)) = provider.acquire(&config).await {
                            let _ = provider.release(&lease).await;
                        }
                        Ok(())
                    }
                })
                .await?
            } else {
                let (bare, clock) = (Arc::clone(&bare), clock.clone());
                let root = root.clone();
                count_pairs(workers, warmup, window, process_cpu, move |w| {
                    let (bare, clock) = (Arc::clone(&bare), clock.clone());
                    let lock = format!("{root}/locks/bare-{}", lock_name(w));
                    async move {
                        bare_pair(&bare, &clock, &lock).await;
                        Ok(())
                    }
                })
                .await?
            };
            round[client] = (counted.per_second(), counted.cpu_us_per_pair());
        }
        ours.push(round[0].0);
        raw.push(round[1].0);
        ratios.push(round[0].0 / round[1].0);
        cpu.push((round[0].1, round[1].1));
    }
    let cpu_ours = median(&cpu.iter().map(|c| c.0).collect::<Vec<_>>());
    let cpu_raw = median(&cpu.iter().map(|c| c.1).collect::<Vec<_>>());
    println!(
        "zk-lock-bench workers={workers} mode={mode} pairs_per_sec={:.0} bare_client_pairs_per_sec={:.0} ratio={:.2} cpu_us_per_pair={cpu_ours:.1}/{cpu_raw:.1}",
        median(&ours),
        median(&raw),
        median(&ratios)
    );
    println!(
        "zk-lock-bench-runs workers={workers} mode={mode} ours={ours:.0?} bare={raw:.0?} ratios={ratios:.2?}"
    );
    Ok(())
}

type Elected = mpsc::UnboundedSender<(usize, Instant)>;

fn candidate(elector: &ZkElector, id: usize, elected: &Elected) -> anyhow::Result<LeaderElection> {
    let elected = elected.clone();
    Ok(LeaderElection::builder("bench", elector.clone())
        .config(TIMING)
        .on_elected(move |_| {
            let _ = elected.send((id, Instant::now()));
        })
        .start()?)
}

async fn next_elected(
    rx: &mut mpsc::UnboundedReceiver<(usize, Instant)>,
) -> anyhow::Result<(usize, Instant)> {
    tokio::time::timeout(STEP_TIMEOUT, rx.recv())
        .await?
        .ok_or_else(|| anyhow::anyhow!("election callbacks closed"))
}

/// Graceful handover: two candidates in this process (each campaign on its own session); from
/// the leader's `resign()` to the other's `on_elected`. The resigned one joins again after a
/// random pause, at the end of the line.
async fn graceful(url: &str, handovers: usize) -> anyhow::Result<()> {
    let elector = ZkElector::builder(url)
        .root(root("graceful"))
        .connect()
        .await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut elections = vec![candidate(&elector, 0, &tx)?];
    let (mut leader, _) = next_elected(&mut rx).await?;
    elections.push(candidate(&elector, 1, &tx)?);
    let mut samples = Vec::new();
    for _ in 0..handovers {
        tokio::time::sleep(Duration::from_millis(200 + fastrand::u64(..256))).await;
        let resigned_at = Instant::now();
        elections[leader].resign().await;
        let (next, at) = next_elected(&mut rx).await?;
        anyhow::ensure!(next != leader, "the resigned candidate was elected again");
        samples.push((at - resigned_at).as_secs_f64() * 1e3);
        elections[leader] = candidate(&elector, leader, &tx)?;
        leader = next;
    }
    for election in &elections {
        election.resign().await;
    }
    report_handover("graceful", &samples);
    Ok(())
}

/// Killed leader: a leader in a child process (`shedlock-bench zk-candidate URL ROOT`) is
/// SIGKILLed; from the kill to the in-process follower's `on_elected` (the ensemble expires the
/// dead session first).
async fn killed(url: &str, handovers: usize) -> anyhow::Result<()> {
    let exe = std::env::current_exe()?;
    let mut samples = Vec::new();
    for round in 0..handovers {
        let root = root(&format!("killed-{round}"));
        let mut child = tokio::process::Command::new(&exe)
            .args(["zk-candidate", url, &root])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        tokio::time::timeout(STEP_TIMEOUT, async {
            while let Some(line) = lines.next_line().await? {
                if line == "leader" {
                    return Ok(());
                }
            }
            anyhow::bail!("the child candidate ended before leading")
        })
        .await??;
        let elector = ZkElector::builder(url).root(&root).connect().await?;
        let (tx, mut rx) = mpsc::unbounded_channel();
        let follower = candidate(&elector, 1, &tx)?;
        // Let the follower join and watch the leader's node.
        tokio::time::sleep(TIMING.retry_period).await;
        let killed_at = Instant::now();
        child.start_kill()?;
        let (_, at) = next_elected(&mut rx).await?;
        samples.push((at - killed_at).as_secs_f64() * 1e3);
        follower.resign().await;
        let _ = child.wait().await;
    }
    report_handover("killed", &samples);
    Ok(())
}

/// The child of [`killed`]: leads the election under `root`, prints `leader`, waits to be killed.
pub(crate) async fn child_candidate(url: &str, root: &str) -> anyhow::Result<()> {
    let elector = ZkElector::builder(url).root(root).connect().await?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let _election = candidate(&elector, 0, &tx)?;
    next_elected(&mut rx).await?;
    println!("leader");
    std::future::pending::<()>().await;
    Ok(())
}

fn report_handover(case: &str, samples: &[f64]) {
    println!(
        "zk-handover case={case} n={} median_ms={:.1} p99_ms={:.1} min_ms={:.1} max_ms={:.1} config=session{}ms/renew{}ms/retry{}ms",
        samples.len(),
        median(samples),
        percentile(samples, 99.0),
        samples.iter().copied().fold(f64::INFINITY, f64::min),
        samples.iter().copied().fold(0.0, f64::max),
        TIMING.lease_duration.as_millis(),
        TIMING.renew_deadline.as_millis(),
        TIMING.retry_period.as_millis()
    );
}
