//! Redis: acquire + release pairs per second through `RedisLockProvider`, against the same two
//! Lua scripts through a bare redis-rs loop (same connection kind), against `redis-benchmark`
//! running both scripts as one (the ceiling: the server's work with one round trip instead of
//! two and no Rust client); RedLock over three masters against one server; graceful leader
//! handover with release hints. Runs of the clients interleaved (A B C, then C B A, …), medians
//! of the per-round ratios reported.

use std::sync::Arc;
use std::time::{Duration, Instant};

use redis::Script;
use redis::aio::ConnectionManager;
use shedlock::{
    ElectionConfig, LeaderElection, LockConfiguration, LockProvider, redis::RedLockProvider,
    redis::RedisLockProvider,
};
use shedlock_test_support::throughput::count_pairs;

use crate::Settings;
use crate::stats::{median, percentile, process_cpu};

const LEASE: Duration = Duration::from_secs(600);
const ACQUIRE: &str = include_str!("../../shedlock-redis/lua/acquire.lua");
const RELEASE: &str = include_str!("../../shedlock-redis/lua/release.lua");

/// The server URLs: `SHEDLOCK_TEST_REDIS_URL` and `SHEDLOCK_TEST_REDLOCK_URLS`, else the
/// local defaults.
struct Servers {
    single: String,
    masters: Vec<String>,
}

impl Servers {
    fn from_env() -> Servers {
        let var = |name: &str, default: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .unwrap_or_else(|| default.to_owned())
        };
        Servers {
            single: var("SHEDLOCK_TEST_REDIS_URL", "redis://127.0.0.1:6379"),
            masters: var(
                "SHEDLOCK_TEST_REDLOCK_URLS",
                "redis://127.0.0.1:6380,redis://127.0.0.1:6381,redis://127.0.0.1:6382",
            )
            .split(',')
            .map(str::to_owned)
            .collect(),
        }
    }
}

/// Who sends the scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Client {
    /// `RedisLockProvider`, one for all workers (as one instance of a service has).
    Ours,
    /// The same two scripts by `EVALSHA` through one redis-rs `ConnectionManager`.
    Raw,
    /// `redis-benchmark`, both scripts in one `EVALSHA`, a connection per worker.
    RedisBenchmark,
    /// `RedLockProvider` over the three masters.
    RedLock,
}

impl Client {
    fn label(self) -> &'static str {
        match self {
            Client::Ours => "ours",
            Client::Raw => "raw",
            Client::RedisBenchmark => "redis-benchmark",
            Client::RedLock => "redlock-3",
        }
    }
}

/// One timed run: pairs per second and client CPU per pair (µs; none for redis-benchmark).
#[derive(Debug, Clone, Copy)]
struct Run {
    pairs_per_sec: f64,
    cpu_us_per_pair: Option<f64>,
}

/// A key prefix no earlier run used.
fn prefix(client: Client) -> String {
    format!("bench:{}:{}:", client.label(), std::process::id())
}

/// Times `workers` loops of `pair` (which returns whether it acquired) after a warm-up.
async fn timed<F, Fut>(workers: usize, settings: &Settings, pair: F) -> anyhow::Result<Run>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = anyhow::Result<bool>> + Send,
{
    let counted = count_pairs(
        workers,
        settings.warmup,
        settings.run,
        process_cpu,
        move |w| {
            let acquired = pair(w);
            async move {
                anyhow::ensure!(acquired.await?, "an uncontended lock was not acquired");
                Ok(())
            }
        },
    )
    .await?;
    Ok(Run {
        pairs_per_sec: counted.per_second(),
        cpu_us_per_pair: Some(counted.cpu_us_per_pair()),
    })
}

/// A provider's pairs, each worker on a lock of its own.
async fn provider_run(
    provider: Arc<dyn LockProvider>,
    workers: usize,
    settings: &Settings,
) -> anyhow::Result<Run> {
    let configs: Arc<Vec<LockConfiguration>> = Arc::new(
        (0..workers)
            .map(|i| LockConfiguration::new(format!("w{i}"), LEASE, Duration::ZERO))
            .collect::<Result<_, _>>()?,
    );
    timed(workers, settings, move |worker| {
        let (provider, configs) = (Arc::clone(&provider), Arc::clone(&configs));
        async move {
            let Some(lease) = provider.acquire(&configs[worker]).await? else {
                return Ok(false);
            };
            Ok(provider.release(&lease).await?)
        }
    })
    .await
}

/// The bare loop: the provider's two scripts, with the provider's arguments.
async fn raw_run(url: &str, workers: usize, settings: &Settings) -> anyhow::Result<Run> {
    let connection = ConnectionManager::new(redis::Client::open(url)?).await?;
    let (acquire, release) = (
        Arc::new(Script::new(ACQUIRE)),
        Arc::new(Script::new(RELEASE)),
    );
    let keys: Arc<Vec<String>> = Arc::new(
        (0..workers)
            .map(|i| format!("{}w{i}", prefix(Client::Raw)))
            .collect(),
    );
    let lease_ms = LEASE.as_millis().to_string();
    timed(workers, settings, move |worker| {
        let (mut connection, acquire, release, keys) = (
            connection.clone(),
            Arc::clone(&acquire),
            Arc::clone(&release),
            Arc::clone(&keys),
        );
        let lease_ms = lease_ms.clone();
        async move {
            let key = &keys[worker];
            let reply: Vec<redis::Value> = acquire
                .key(key)
                .arg("bench-raw")
                .arg(&lease_ms)
                .arg(0)
                .arg(0)
                .invoke_async(&mut connection)
                .await?;
            let token: u64 = redis::from_redis_value_ref(&reply[1])?;
            let released: i64 = release
                .key(key)
                .arg("bench-raw")
                .arg(token)
                .arg(0)
                .arg("bench:released")
                .arg(format!("w{worker}"))
                .invoke_async(&mut connection)
                .await?;
            Ok(redis::from_redis_value_ref::<i64>(&reply[0])? == 1 && released == 1)
        }
    })
    .await
}

/// Both scripts as one, for `redis-benchmark`: the same server work, one round trip.
fn pair_script() -> String {
    format!(
        "local function acquire(KEYS, ARGV)\n{ACQUIRE}\nend\n\
         local function release(KEYS, ARGV)\n{RELEASE}\nend\n\
         local a = acquire(KEYS, {{ARGV[1], ARGV[2], '0', '0'}})\n\
         return release(KEYS, {{ARGV[1], tostring(a[2]), '0', 'bench:released', 'x'}})\n"
    )
}

/// `redis-benchmark` with a connection per worker, random keys (so workers rarely share one).
async fn redis_benchmark_run(
    url: &str,
    workers: usize,
    settings: &Settings,
) -> anyhow::Result<Run> {
    let mut connection = ConnectionManager::new(redis::Client::open(url)?).await?;
    let sha = Script::new(&pair_script())
        .load_async(&mut connection)
        .await?;
    let info = redis::Client::open(url)?.get_connection_info().clone();
    let addr = info.addr().to_string();
    let (host, port) = addr.rsplit_once(':').unwrap_or((&addr, "6379"));
    // About as many requests as the other clients make in a run.
    let requests = ((settings.run.as_secs_f64() * 40_000.0) as usize * workers.min(4)).max(20_000);
    let key = format!("{}__rand_int__", prefix(Client::RedisBenchmark));
    let output = tokio::process::Command::new("redis-benchmark")
        .args(["-h", host, "-p", port, "-q"])
        .args([
            "-c",
            &workers.to_string(),
            "-n",
            &requests.to_string(),
            "-r",
            "1000000",
        ])
        .args([
            "evalsha",
            &sha,
            "1",
            &key,
            "bench-rb",
            &LEASE.as_millis().to_string(),
        ])
        .kill_on_drop(true)
        .output()
        .await?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    // "evalsha …: 51234.56 requests per second, p50=…" (a progress line may precede it).
    let rate = stdout
        .rsplit("requests per second")
        .nth(1)
        .and_then(|before| before.split_whitespace().last())
        .and_then(|n| n.parse::<f64>().ok())
        .ok_or_else(|| anyhow::anyhow!("no rate in redis-benchmark output: {stdout}"))?;
    Ok(Run {
        pairs_per_sec: rate,
        cpu_us_per_pair: None,
    })
}

/// Deletes the benchmark's keys on `url`.
async fn cleanup(url: &str) -> anyhow::Result<()> {
    let mut connection = ConnectionManager::new(redis::Client::open(url)?).await?;
    let mut cursor = 0u64;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("MATCH")
            .arg("bench:*")
            .arg("COUNT")
            .arg(1000)
            .query_async(&mut connection)
            .await?;
        if !keys.is_empty() {
            redis::cmd("DEL")
                .arg(&keys)
                .query_async::<()>(&mut connection)
                .await?;
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
}

fn cpu_text(runs: &[Run]) -> String {
    let cpu: Vec<f64> = runs.iter().filter_map(|r| r.cpu_us_per_pair).collect();
    if cpu.is_empty() {
        "-".to_owned()
    } else {
        format!("{:.1} µs", median(&cpu))
    }
}

/// Runs `clients` interleaved for `settings.reps` rounds and prints each client's median rate,
/// CPU per pair, and its per-round ratio to the first client.
async fn case(
    servers: &Servers,
    name: &str,
    clients: &[Client],
    workers: usize,
    settings: &Settings,
) -> anyhow::Result<Vec<f64>> {
    let clients: Vec<Client> = clients
        .iter()
        .copied()
        .filter(|c| {
            settings
                .clients
                .as_ref()
                .is_none_or(|only| only.iter().any(|o| o == c.label()))
        })
        .collect();
    if clients.is_empty() {
        return Ok(Vec::new());
    }
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); clients.len()];
    for rep in 0..settings.reps {
        let mut order: Vec<usize> = (0..clients.len()).collect();
        if rep % 2 == 1 {
            order.reverse();
        }
        for i in order {
            let run = match clients[i] {
                Client::Ours => {
                    let provider = RedisLockProvider::builder()
                        .key_prefix(prefix(Client::Ours))
                        .holder("bench-ours")
                        .connect(&servers.single)
                        .await?;
                    provider_run(Arc::new(provider), workers, settings).await?
                }
                Client::RedLock => {
                    let provider = RedLockProvider::builder()
                        .key_prefix(prefix(Client::RedLock))
                        .holder("bench-redlock")
                        .timeout(Duration::from_millis(250))
                        .connect(&servers.masters)
                        .await?;
                    provider_run(Arc::new(provider), workers, settings).await?
                }
                Client::Raw => raw_run(&servers.single, workers, settings).await?,
                Client::RedisBenchmark => {
                    redis_benchmark_run(&servers.single, workers, settings).await?
                }
            };
            runs[i].push(run);
        }
    }
    let base: Vec<f64> = runs[0].iter().map(|r| r.pairs_per_sec).collect();
    let mut ratios = Vec::new();
    for (client, runs) in clients.iter().zip(&runs) {
        let rates: Vec<f64> = runs.iter().map(|r| r.pairs_per_sec).collect();
        let ratio = median(
            &base
                .iter()
                .zip(&rates)
                .map(|(ours, other)| ours / other)
                .collect::<Vec<_>>(),
        );
        ratios.push(ratio);
        println!(
            "redis-bench case={name} workers={workers} client={} pairs_per_sec={:.0} cpu_per_pair={} {}_to_this={ratio:.2} runs={:?}",
            client.label(),
            median(&rates),
            cpu_text(runs),
            clients[0].label(),
            rates.iter().map(|r| r.round()).collect::<Vec<_>>()
        );
    }
    Ok(ratios)
}

/// The next election event, within 30 s.
async fn next(
    events: &mut tokio::sync::mpsc::UnboundedReceiver<(usize, Instant)>,
) -> anyhow::Result<(usize, Instant)> {
    tokio::time::timeout(Duration::from_secs(30), events.recv())
        .await?
        .ok_or_else(|| anyhow::anyhow!("election events ended"))
}

/// Two providers from `connect`, acquiring as `a` and `b`: the handover's candidates.
async fn two<P, F>(
    connect: impl Fn(&'static str) -> F,
) -> anyhow::Result<[Arc<dyn LockProvider>; 2]>
where
    P: LockProvider + 'static,
    F: Future<Output = Result<P, shedlock::Error>>,
{
    Ok([Arc::new(connect("a").await?), Arc::new(connect("b").await?)])
}

/// Graceful handovers between two candidates (each on connections of its own): the time from
/// `resign()` on the leader to `on_elected` on the other; the resigned one campaigns again.
async fn handover(
    store: &str,
    providers: [Arc<dyn LockProvider>; 2],
    count: usize,
) -> anyhow::Result<()> {
    // A retry period far above the figures: a faster handover comes from a release hint.
    let config = ElectionConfig {
        lease_duration: Duration::from_secs(10),
        renew_deadline: Duration::from_secs(8),
        retry_period: Duration::from_secs(2),
    };
    let (sender, mut events) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let name = format!("bench-handover-{}", std::process::id());
    let campaign = |who: usize| {
        let sender = sender.clone();
        LeaderElection::builder(name.clone(), Arc::clone(&providers[who]))
            .config(config)
            .on_elected(move |_| {
                let _ = sender.send((who, Instant::now()));
            })
            .start()
    };
    let mut elections = [Some(campaign(0)?), None];
    let (mut leader, _) = next(&mut events).await?;
    elections[1] = Some(campaign(1)?);
    let mut millis = Vec::with_capacity(count);
    for _ in 0..count {
        // Let the follower subscribe to hints and make its first attempt.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let resigned_at = Instant::now();
        if let Some(election) = elections[leader].take() {
            election.resign().await;
        }
        let (elected, at) = next(&mut events).await?;
        anyhow::ensure!(elected != leader, "the resigned candidate was elected");
        millis.push(at.duration_since(resigned_at).as_secs_f64() * 1e3);
        elections[leader] = Some(campaign(leader)?);
        leader = elected;
    }
    for election in elections.into_iter().flatten() {
        election.resign().await;
    }
    println!(
        "redis-bench handover store={store} count={count} median_ms={:.2} p90_ms={:.2} max_ms={:.2} retry_period_ms={}",
        median(&millis),
        percentile(&millis, 90.0),
        millis.iter().copied().fold(0.0, f64::max),
        config.retry_period.as_millis()
    );
    Ok(())
}

/// The Redis part of the benchmarks.
pub(crate) async fn run(settings: &Settings) -> anyhow::Result<()> {
    let servers = Servers::from_env();
    println!(
        "# redis: single={} masters={}",
        servers.single,
        servers.masters.join(",")
    );
    let mut to_raw = Vec::new();
    for &workers in &settings.workers {
        let ratios = case(
            &servers,
            "single",
            &[Client::Ours, Client::Raw, Client::RedisBenchmark],
            workers,
            settings,
        )
        .await?;
        to_raw.extend(ratios.get(1).copied().filter(|r| r.is_finite()));
        case(
            &servers,
            "redlock",
            &[Client::RedLock, Client::Ours],
            workers,
            settings,
        )
        .await?;
    }
    let met = to_raw.iter().filter(|&&r| r >= 0.95).count();
    println!(
        "summary redis ratio_to_raw: min={:.2}, >= 0.95 in {met} of {} cases",
        to_raw.iter().copied().fold(f64::INFINITY, f64::min),
        to_raw.len()
    );
    let single = |holder: &str| {
        RedisLockProvider::builder()
            .key_prefix(prefix(Client::Ours))
            .holder(holder)
            .connect(&servers.single)
    };
    handover("redis", two(single).await?, settings.handovers).await?;
    let redlock = |holder: &str| {
        RedLockProvider::builder()
            .key_prefix(prefix(Client::RedLock))
            .holder(holder)
            .timeout(Duration::from_millis(250))
            .connect(&servers.masters)
    };
    handover("redlock-3", two(redlock).await?, settings.handovers).await?;
    cleanup(&servers.single).await?;
    for master in &servers.masters {
        cleanup(master).await?;
    }
    Ok(())
}
