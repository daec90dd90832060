//! Back to work after the store returns (issue 33), per store: three instances (this binary
//! re-executed as `instance`) run one locked per-second cron job on the real `Scheduler`,
//! reaching the store through TCP proxies that this process controls. The proxies stop (every
//! connection cut, new ones refused: the store is down as the instances see it) for a few
//! seconds and listen again. Printed per round: the time from "the store accepts connections"
//! (the proxies listen again) to the first tick that starts, how late that tick started past
//! its fire time, the ticks after the return that ran once, were lost or ran twice, and runs
//! doubled anywhere in the round.
//!
//! With `--silent` the proxies instead forward and answer nothing for the outage, on open and
//! new connections, without a reset (a partition that drops packets), then forward again what
//! waited; "accepts connections" is then the moment they forward again.
//!
//! The proxies stand in for a server restart without stopping anyone's server (the shared
//! PostgreSQL and MariaDB, the ZooKeeper ensemble and etcd cluster of `.ci`): to the clients
//! it looks the same (connections reset, then refused, then accepted), but the servers keep
//! their state, so a ZooKeeper session may outlive a short outage where a real ensemble
//! restart would not.
//!
//! Run with `bash scripts/store-return.sh`, or
//! `cargo run -p shedlock-bench --bin store_return -- [--down-secs 7] [--phases 0.3,0.9] [--silent]
//! [postgres mysql redis redlock zookeeper etcd]` (default: every store whose test URL is set:
//! `SHEDLOCK_TEST_PG_URL`, `SHEDLOCK_TEST_MYSQL_URL`, `SHEDLOCK_TEST_REDIS_URL`,
//! `SHEDLOCK_TEST_REDLOCK_URLS`, `SHEDLOCK_TEST_ZK_URL`, `SHEDLOCK_TEST_ETCD_URL`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail};
use shedlock::etcd::EtcdLockProvider;
use shedlock::redis::RedisLockProvider;
use shedlock::sql::{MySqlLockProvider, PgLockProvider};
use shedlock::zookeeper::ZkLockProvider;
use shedlock::{Job, JobLock, JobRegistry, LockProvider, RunContext, Schedule, Scheduler};
use shedlock_conformance::{CutProxy, ProxyMode, upstream_of, url_at};
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

/// Instances per round.
const INSTANCES: usize = 3;
/// Ticks run by every instance's fleet before the store goes down.
const SETTLE_TICKS: usize = 3;
/// Seconds watched after the first tick back.
const WATCH_AFTER: Duration = Duration::from_secs(5);
/// Longest wait for the first tick after the return before the round counts as failed.
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);

/// A store under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Store {
    Postgres,
    MySql,
    Redis,
    RedLock,
    ZooKeeper,
    Etcd,
}

impl Store {
    const ALL: [Store; 6] = [
        Store::Postgres,
        Store::MySql,
        Store::Redis,
        Store::RedLock,
        Store::ZooKeeper,
        Store::Etcd,
    ];

    fn name(self) -> &'static str {
        match self {
            Store::Postgres => "postgres",
            Store::MySql => "mysql",
            Store::Redis => "redis",
            Store::RedLock => "redlock",
            Store::ZooKeeper => "zookeeper",
            Store::Etcd => "etcd",
        }
    }

    fn parse(name: &str) -> anyhow::Result<Store> {
        Store::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .with_context(|| {
                format!("unknown store {name:?}: postgres, mysql, redis, redlock, zookeeper, etcd")
            })
    }

    fn url_var(self) -> &'static str {
        match self {
            Store::Postgres => "SHEDLOCK_TEST_PG_URL",
            Store::MySql => "SHEDLOCK_TEST_MYSQL_URL",
            Store::Redis => "SHEDLOCK_TEST_REDIS_URL",
            Store::RedLock => "SHEDLOCK_TEST_REDLOCK_URLS",
            Store::ZooKeeper => "SHEDLOCK_TEST_ZK_URL",
            Store::Etcd => "SHEDLOCK_TEST_ETCD_URL",
        }
    }

    /// The servers (`host:port`) behind the store's URL.
    fn upstreams(self, url: &str) -> anyhow::Result<Vec<String>> {
        match self {
            Store::ZooKeeper => Ok(url
                .split('/')
                .next()
                .unwrap_or(url)
                .split(',')
                .map(str::to_owned)
                .collect()),
            _ => url.split(',').map(upstream_of).collect(),
        }
    }

    /// The URL with each server replaced by its proxy.
    fn through(self, url: &str, proxies: &[SocketAddr]) -> anyhow::Result<String> {
        match self {
            Store::ZooKeeper => {
                let path = url.find('/').map_or("", |i| &url[i..]);
                let hosts: Vec<String> = proxies.iter().map(ToString::to_string).collect();
                Ok(format!("{}{path}", hosts.join(",")))
            }
            _ => {
                let urls: anyhow::Result<Vec<String>> = url
                    .split(',')
                    .zip(proxies)
                    .map(|(u, addr)| url_at(u, *addr))
                    .collect();
                Ok(urls?.join(","))
            }
        }
    }
}

/// The proxies in front of one store's servers; they can be stopped and started again on the
/// same ports.
struct Proxies {
    upstreams: Vec<String>,
    addrs: Vec<SocketAddr>,
    running: Vec<CutProxy>,
}

impl Proxies {
    async fn start(upstreams: Vec<String>) -> anyhow::Result<Proxies> {
        let mut running = Vec::new();
        for upstream in &upstreams {
            running.push(CutProxy::start(upstream).await?);
        }
        let addrs = running.iter().map(CutProxy::addr).collect();
        Ok(Proxies {
            upstreams,
            addrs,
            running,
        })
    }

    /// Cuts every connection and refuses new ones; returns once every port refuses.
    async fn stop(&mut self) {
        self.running.clear();
        for addr in &self.addrs {
            while tokio::net::TcpStream::connect(addr).await.is_ok() {
                tokio::task::yield_now().await;
            }
        }
    }

    /// Forwards nothing and answers nothing, on open and new connections (a network that
    /// drops packets, no reset): what was sent waits in the sockets.
    fn pause(&self) {
        for proxy in &self.running {
            proxy.set(ProxyMode::Blackhole);
        }
    }

    /// Forwards again, what waited first.
    fn resume(&self) {
        for proxy in &self.running {
            proxy.set(ProxyMode::Open);
        }
    }

    /// Listens again on the same ports; returns once every one accepts.
    async fn start_again(&mut self) -> anyhow::Result<()> {
        for (addr, upstream) in self.addrs.iter().zip(&self.upstreams) {
            let mut attempts = 0;
            let proxy = loop {
                match CutProxy::bind(*addr, upstream).await {
                    Ok(proxy) => break proxy,
                    Err(e) if attempts < 100 => {
                        attempts += 1;
                        tracing::debug!(%e, "rebinding {addr}");
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                    Err(e) => return Err(e).context(format!("listen again on {addr}")),
                }
            };
            self.running.push(proxy);
        }
        Ok(())
    }
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// One run, as an instance reported it.
#[derive(Debug, Clone, Copy)]
struct RunLine {
    /// The fire time, in whole seconds since 1970.
    tick_s: i64,
    start_us: i64,
}

/// Starts `INSTANCES` instances of `store` at `url` on `lock`; their run lines go to `runs`.
fn spawn_instances(
    store: Store,
    url: &str,
    lock: &str,
    runs: &Arc<Mutex<Vec<RunLine>>>,
    log: &std::path::Path,
) -> anyhow::Result<Vec<Child>> {
    let exe = std::env::current_exe()?;
    let mut children = Vec::new();
    for instance in 0..INSTANCES {
        let stderr = std::fs::File::options()
            .create(true)
            .append(true)
            .open(log)?;
        let mut child = Command::new(&exe)
            .args([
                "instance",
                store.name(),
                lock,
                &format!("instance-{instance}"),
            ])
            .env("STORE_RETURN_URL", url)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().context("instance stdout")?;
        let runs = Arc::clone(runs);
        tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let words: Vec<&str> = line.split_whitespace().collect();
                if let ["run", tick, start] = words[..]
                    && let (Ok(tick_s), Ok(start_us)) = (tick.parse(), start.parse())
                {
                    runs.lock().unwrap().push(RunLine { tick_s, start_us });
                }
            }
        });
        children.push(child);
    }
    Ok(children)
}

/// Waits until `condition` holds of the runs, checking every 20 ms; false after `bound`.
async fn wait_runs(
    runs: &Arc<Mutex<Vec<RunLine>>>,
    bound: Duration,
    condition: impl Fn(&[RunLine]) -> bool,
) -> bool {
    let deadline = tokio::time::Instant::now() + bound;
    while tokio::time::Instant::now() < deadline {
        if condition(&runs.lock().unwrap()) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// What one round measured.
#[derive(Debug)]
struct Round {
    down_ms: i64,
    phase: f64,
    /// From the proxies listening again to the first run's start.
    first_run_ms: Option<i64>,
    /// That run's start past its fire time.
    first_late_ms: i64,
    /// The first fire time after the return, and whether it ran.
    first_due_ran: bool,
    after_ticks: usize,
    after_once: usize,
    after_lost: usize,
    doubled: usize,
    lost_while_down: usize,
}

/// How the store goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outage {
    /// Connections cut, new ones refused (a server stopped): the default.
    Refused,
    /// Nothing forwarded, nothing answered, no reset (`--silent`: a partition).
    Silent,
}

async fn round(
    store: Store,
    url: &str,
    down: Duration,
    phase: f64,
    outage: Outage,
) -> anyhow::Result<Round> {
    let mut proxies = Proxies::start(store.upstreams(url)?).await?;
    let proxied = store.through(url, &proxies.addrs)?;
    let lock = format!("store-return-{}-{}", store.name(), now_us());
    let log = std::env::temp_dir().join(format!("{lock}.log"));
    let runs: Arc<Mutex<Vec<RunLine>>> = Arc::default();
    let children = spawn_instances(store, &proxied, &lock, &runs, &log)?;

    if !wait_runs(&runs, Duration::from_secs(30), |r| r.len() >= SETTLE_TICKS).await {
        bail!(
            "{}: no run within 30 s (instance log: {})",
            store.name(),
            log.display()
        );
    }
    // Go down so that the store is back `phase` of a second after a fire time.
    let down_us = down.as_micros() as i64;
    let up_target =
        (now_us() + down_us + 1_000_000) / 1_000_000 * 1_000_000 + (phase * 1_000_000.0) as i64;
    let down_target = up_target - down_us;
    tokio::time::sleep(Duration::from_micros((down_target - now_us()).max(0) as u64)).await;
    let down_at = now_us();
    match outage {
        Outage::Refused => proxies.stop().await,
        Outage::Silent => proxies.pause(),
    }
    tokio::time::sleep(Duration::from_micros((up_target - now_us()).max(0) as u64)).await;
    match outage {
        Outage::Refused => proxies.start_again().await?,
        Outage::Silent => proxies.resume(),
    }
    let up_at = now_us();

    let first = wait_runs(&runs, GIVE_UP_AFTER, |r| {
        r.iter().any(|run| run.start_us >= up_at)
    })
    .await;
    if first {
        tokio::time::sleep(WATCH_AFTER).await;
    }
    let end = now_us();
    drop(children);
    drop(proxies);
    drop_tables(store, url, &lock).await;
    let runs = runs.lock().unwrap().clone();

    let mut per_tick: BTreeMap<i64, usize> = BTreeMap::new();
    for run in &runs {
        *per_tick.entry(run.tick_s).or_default() += 1;
    }
    let first_due = (up_at + 999_999) / 1_000_000;
    // Ticks whose run could have been reported before the end (a second of slack).
    let last_due = (end - 1_000_000) / 1_000_000;
    let after: Vec<i64> = (first_due..=last_due).collect();
    let ran = |tick: &i64| per_tick.get(tick).copied().unwrap_or(0);
    let first_run = runs
        .iter()
        .filter(|r| r.start_us >= up_at)
        .min_by_key(|r| r.start_us);
    let down_ticks = (down_at + 999_999) / 1_000_000..first_due;
    Ok(Round {
        down_ms: (up_at - down_at) / 1000,
        phase,
        first_run_ms: first_run.map(|r| (r.start_us - up_at) / 1000),
        first_late_ms: first_run.map_or(0, |r| (r.start_us - r.tick_s * 1_000_000) / 1000),
        first_due_ran: ran(&first_due) > 0,
        after_ticks: after.len(),
        after_once: after.iter().filter(|t| ran(t) == 1).count(),
        after_lost: after.iter().filter(|t| ran(t) == 0).count(),
        doubled: per_tick.values().filter(|&&n| n > 1).count(),
        lost_while_down: down_ticks.filter(|t| ran(t) == 0).count(),
    })
}

fn print_round(store: Store, r: &Round) {
    let first = match r.first_run_ms {
        Some(ms) => format!(
            "first tick {:.2} s after the store accepted connections ({} ms past its fire \
             time; the first due tick {})",
            ms as f64 / 1000.0,
            r.first_late_ms,
            if r.first_due_ran { "ran" } else { "was lost" }
        ),
        None => format!("no tick within {GIVE_UP_AFTER:?} of the return"),
    };
    println!(
        "{:<9} down {:.1} s, back {:.1} s after a tick: {first}; after the return {} of {} \
         ticks ran once, {} lost; doubled {}; lost while down {}",
        store.name(),
        r.down_ms as f64 / 1000.0,
        r.phase,
        r.after_once,
        r.after_ticks,
        r.after_lost,
        r.doubled,
        r.lost_while_down,
    );
}

/// One instance: a scheduler with one per-second locked job that prints `run <tick> <start>`.
async fn instance(store: Store, lock: &str, holder: &str) -> anyhow::Result<()> {
    let url = std::env::var("STORE_RETURN_URL").context("STORE_RETURN_URL")?;
    let provider: Arc<dyn LockProvider> = match store {
        Store::Postgres => {
            let pool = PgLockProvider::connect(&url).await?.pool().clone();
            let p = PgLockProvider::builder(pool)
                .table(table_of(lock))
                .holder(holder)
                .build()?;
            p.create_schema().await?;
            Arc::new(p)
        }
        Store::MySql => {
            let pool = MySqlLockProvider::connect(&url).await?.pool().clone();
            let p = MySqlLockProvider::builder(pool)
                .table(table_of(lock))
                .holder(holder)
                .build()?;
            p.create_schema().await?;
            Arc::new(p)
        }
        Store::Redis => Arc::new(
            RedisLockProvider::builder()
                .key_prefix(format!("{lock}:"))
                .holder(holder)
                .connect(&url)
                .await?,
        ),
        Store::RedLock => Arc::new(
            RedisLockProvider::builder()
                .key_prefix(format!("{lock}:"))
                .holder(holder)
                .redlock()
                .connect(url.split(','))
                .await?,
        ),
        Store::ZooKeeper => {
            let p = ZkLockProvider::builder(&url)
                .root(format!("/{lock}"))
                .holder(holder)
                .connect()
                .await?;
            p.create_schema().await?;
            Arc::new(p)
        }
        Store::Etcd => Arc::new(
            EtcdLockProvider::builder(&url)
                .prefix(format!("{lock}/"))
                .holder(holder)
                .connect()
                .await?,
        ),
    };
    let job = Job::new("tick", Schedule::cron("* * * * * *")?, |()| async move {
        let tick = RunContext::current()
            .and_then(|run| run.tick())
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |t| t.as_secs() as i64);
        println!("run {tick} {}", now_us());
        tokio::time::sleep(Duration::from_millis(100)).await;
    })
    .with_lock(JobLock::new(lock.to_owned())?.lock_at_most_for(Duration::from_secs(10))?);
    let scheduler = Scheduler::builder()
        .shared_provider(provider)
        .registry(JobRegistry::new(()).add(job))
        .start()
        .await?;
    // Runs until the parent closes stdin or kills it.
    let mut stdin = tokio::io::stdin();
    let _ = tokio::io::copy(&mut stdin, &mut tokio::io::sink()).await;
    scheduler.shutdown().await;
    Ok(())
}

/// Drops the round's SQL tables (the instances made them).
async fn drop_tables(store: Store, url: &str, lock: &str) {
    use sqlx::{AssertSqlSafe, Connection as _};
    let table = table_of(lock);
    let sql = format!("DROP TABLE IF EXISTS {table}, {table}_runs");
    let dropped = match store {
        Store::Postgres => match sqlx::PgConnection::connect(url).await {
            Ok(mut c) => sqlx::query(AssertSqlSafe(sql))
                .execute(&mut c)
                .await
                .map(drop),
            Err(e) => Err(e),
        },
        Store::MySql => match sqlx::MySqlConnection::connect(url).await {
            Ok(mut c) => sqlx::query(AssertSqlSafe(sql))
                .execute(&mut c)
                .await
                .map(drop),
            Err(e) => Err(e),
        },
        _ => Ok(()),
    };
    if let Err(e) = dropped {
        eprintln!("could not drop {table}: {e}");
    }
}

/// A table name of the lock's (a plain identifier).
fn table_of(lock: &str) -> String {
    lock.replace('-', "_")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [command, store, lock, holder] = &args[..]
        && command == "instance"
    {
        return instance(Store::parse(store)?, lock, holder).await;
    }
    let mut down = Duration::from_secs(7);
    let mut phases = vec![0.3, 0.9];
    let mut stores = Vec::new();
    let mut outage = Outage::Refused;
    let mut words = args.iter();
    while let Some(word) = words.next() {
        match word.as_str() {
            "--down-secs" => {
                down = Duration::try_from_secs_f64(words.next().context("--down-secs N")?.parse()?)?
            }
            "--phases" => {
                phases = words
                    .next()
                    .context("--phases 0.3,0.9")?
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()?
            }
            "--silent" => outage = Outage::Silent,
            name => stores.push(Store::parse(name)?),
        }
    }
    if stores.is_empty() {
        stores = Store::ALL
            .into_iter()
            .filter(|s| std::env::var(s.url_var()).is_ok_and(|u| !u.is_empty()))
            .collect();
    }
    println!(
        "{INSTANCES} instances, one per-second locked job; store down {:.1} s through proxies ({})",
        down.as_secs_f64(),
        match outage {
            Outage::Refused => "connections cut and refused",
            Outage::Silent => "silent: nothing forwarded, no reset",
        }
    );
    let mut failed = false;
    for store in stores {
        let Ok(url) = std::env::var(store.url_var()) else {
            println!(
                "{:<9} skipped: {} is not set",
                store.name(),
                store.url_var()
            );
            continue;
        };
        for &phase in &phases {
            match round(store, &url, down, phase, outage).await {
                Ok(r) => {
                    failed |= r.first_run_ms.is_none() || r.doubled > 0 || r.after_lost > 0;
                    print_round(store, &r);
                }
                Err(e) => {
                    failed = true;
                    println!("{:<9} failed: {e:#}", store.name());
                }
            }
        }
    }
    if failed {
        std::process::exit(1);
    }
    Ok(())
}
