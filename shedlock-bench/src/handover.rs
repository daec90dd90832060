//! Handover latency of `LeaderElection`: from the leader's graceful `resign()`, or from the
//! SIGKILL of a leader running in another process, to the new leader's `on_elected`.

use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shedlock::provider::default_holder;
use shedlock::sql::dialect::{Dialect, Pg, Sqlite};
use shedlock::{ElectionConfig, LeaderElection, LockProvider, sql::SqliteLockProvider};
use sqlx::postgres::PgPoolOptions;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use crate::db::{Databases, Db, sql_provider};
use crate::stats::{median, percentile};

const TABLE: &str = "shedlock_bench_election";
/// The longest any single step may take before the benchmark gives up.
const STEP_TIMEOUT: Duration = Duration::from_secs(20);

/// The timing for killed leaders (and SQLite's graceful case): short enough that 20 takeovers
/// after lease expiry stay within about a minute.
pub(crate) fn short_config() -> ElectionConfig {
    ElectionConfig {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(500),
    }
}

fn describe(config: &ElectionConfig) -> String {
    format!(
        "lease={}ms/renew={}ms/retry={}ms",
        config.lease_duration.as_millis(),
        config.renew_deadline.as_millis(),
        config.retry_period.as_millis()
    )
}

/// A provider on a pool of its own, as one instance of a service has.
async fn provider(db: Db, url: &str, holder: String) -> anyhow::Result<Arc<dyn LockProvider>> {
    match db {
        Db::Postgres => {
            // One connection for the lock statements, one for the release-hint listener.
            let pool = PgPoolOptions::new().max_connections(2).connect(url).await?;
            on_table::<Pg>(&pool, &holder).await
        }
        Db::Sqlite => {
            let pool = SqliteLockProvider::connect(url).await?.pool().clone();
            on_table::<Sqlite>(&pool, &holder).await
        }
        Db::Mysql => anyhow::bail!("the handover benchmark covers postgres and sqlite"),
    }
}

/// `D`'s provider on `pool` for the benchmark's table, created if needed.
async fn on_table<D: Dialect>(
    pool: &sqlx::Pool<D::Database>,
    holder: &str,
) -> anyhow::Result<Arc<dyn LockProvider>> {
    let provider = sql_provider::<D>(pool, TABLE, holder, None)?;
    provider.create_schema().await?;
    Ok(Arc::new(provider))
}

type Elected = mpsc::UnboundedSender<(usize, Instant)>;

fn campaign(
    name: &str,
    provider: &Arc<dyn LockProvider>,
    config: ElectionConfig,
    id: usize,
    elected: &Elected,
) -> anyhow::Result<LeaderElection> {
    let elected = elected.clone();
    Ok(LeaderElection::builder(name, Arc::clone(provider))
        .config(config)
        .on_elected(move |_term| {
            let _ = elected.send((id, Instant::now()));
        })
        .start()?)
}

/// Waits for `id`'s election; another candidate's is an error.
async fn elected(
    events: &mut mpsc::UnboundedReceiver<(usize, Instant)>,
    id: usize,
) -> anyhow::Result<Instant> {
    let (who, at) = tokio::time::timeout(STEP_TIMEOUT, events.recv())
        .await?
        .ok_or_else(|| anyhow::anyhow!("election events ended"))?;
    anyhow::ensure!(who == id, "candidate {who} was elected, expected {id}");
    Ok(at)
}

/// A pause of `base` plus up to `spread`, different each time, so that the measured event falls
/// at a random phase of the candidates' retry timers.
async fn settle(base: Duration, spread: Duration) {
    tokio::time::sleep(base + spread.mul_f64(fastrand::f64())).await;
}

/// Two candidates in this process, each on its own pool; the leader resigns, the other takes
/// over; the resigned one campaigns again as follower.
async fn graceful(
    url: &str,
    db: Db,
    config: ElectionConfig,
    count: usize,
) -> anyhow::Result<Vec<f64>> {
    let name = format!("graceful-{}", std::process::id());
    let providers = [
        provider(db, url, format!("{}-a", default_holder())).await?,
        provider(db, url, format!("{}-b", default_holder())).await?,
    ];
    let (sender, mut events) = mpsc::unbounded_channel();
    let mut leader = (0, campaign(&name, &providers[0], config, 0, &sender)?);
    elected(&mut events, 0).await?;
    let mut follower = (1, campaign(&name, &providers[1], config, 1, &sender)?);
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        // Let the follower make its first attempt (and, on PostgreSQL, LISTEN).
        settle(Duration::from_millis(200), config.retry_period).await;
        let resigned_at = Instant::now();
        leader.1.resign().await;
        let at = elected(&mut events, follower.0).await?;
        samples.push((at - resigned_at).as_secs_f64() * 1e3);
        let again = campaign(&name, &providers[leader.0], config, leader.0, &sender)?;
        leader = std::mem::replace(&mut follower, (leader.0, again));
    }
    leader.1.resign().await;
    follower.1.resign().await;
    Ok(samples)
}

/// A leader in a child process (`shedlock-bench candidate …`), SIGKILLed; a candidate in this
/// process takes over once the lease expired, then resigns for the next child.
async fn killed(
    url: &str,
    db: Db,
    config: ElectionConfig,
    count: usize,
) -> anyhow::Result<Vec<f64>> {
    let name = format!("killed-{}", std::process::id());
    let ours = provider(db, url, format!("{}-parent", default_holder())).await?;
    let (sender, mut events) = mpsc::unbounded_channel();
    let mut samples = Vec::with_capacity(count);
    for _ in 0..count {
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .args(["candidate", db.name(), url, &name])
            .args(
                [
                    config.lease_duration,
                    config.renew_deadline,
                    config.retry_period,
                ]
                .map(|d| d.as_millis().to_string()),
            )
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no child stdout"))?;
        let mut lines = BufReader::new(stdout).lines();
        let line = tokio::time::timeout(STEP_TIMEOUT, lines.next_line()).await??;
        anyhow::ensure!(
            line.as_deref().is_some_and(|l| l.starts_with("elected")),
            "child candidate said {line:?}"
        );
        let follower = campaign(&name, &ours, config, 0, &sender)?;
        // Kill at a random phase of the leader's renewals and the follower's retries.
        settle(Duration::from_millis(200), config.retry_period).await;
        let killed_at = Instant::now();
        child.start_kill()?;
        let at = elected(&mut events, 0).await?;
        samples.push((at - killed_at).as_secs_f64() * 1e3);
        child.wait().await?;
        follower.resign().await;
    }
    Ok(samples)
}

/// `shedlock-bench candidate <db> <url> <name> <lease ms> <renew ms> <retry ms>`: campaigns,
/// prints `elected <term>` when elected, and waits to be killed (at most a minute).
pub(crate) async fn candidate(
    db: Db,
    url: &str,
    name: &str,
    [lease_duration, renew_deadline, retry_period]: [Duration; 3],
) -> anyhow::Result<()> {
    let config = ElectionConfig {
        lease_duration,
        renew_deadline,
        retry_period,
    };
    let provider = provider(db, url, format!("{}-child", default_holder())).await?;
    let _election = LeaderElection::builder(name, provider)
        .config(config)
        .on_elected(|term| println!("elected {term}"))
        .start()?;
    tokio::time::sleep(Duration::from_secs(60)).await;
    Ok(())
}

/// Prints the handover latencies on PostgreSQL and SQLite.
pub(crate) async fn run(dbs: &Databases, databases: &[Db], count: usize) -> anyhow::Result<()> {
    for &db in databases.iter().filter(|&&db| db != Db::Mysql) {
        let url = dbs.url(db);
        // PostgreSQL hands over on the release's NOTIFY, so it runs with client-go's default
        // timing: a lost hint would show as a 2 s poll in the p99. SQLite only polls.
        let graceful_config = if db == Db::Postgres {
            ElectionConfig::default()
        } else {
            short_config()
        };
        let cases = [
            (
                "graceful",
                graceful_config,
                graceful(&url, db, graceful_config, count).await?,
            ),
            (
                "killed",
                short_config(),
                killed(&url, db, short_config(), count).await?,
            ),
        ];
        for (kind, config, samples) in cases {
            println!(
                "handover db={} kind={kind} n={} median_ms={:.1} p99_ms={:.1} max_ms={:.1} config={}",
                db.name(),
                samples.len(),
                median(&samples),
                percentile(&samples, 99.0),
                percentile(&samples, 100.0),
                describe(&config)
            );
        }
    }
    Ok(())
}
