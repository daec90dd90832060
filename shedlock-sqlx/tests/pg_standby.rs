//! PostgreSQL with a promoted standby: the pair of `.ci/postgres-standby.sh` (primary 5441,
//! streaming standby 5442). `PgLockProvider::connect_to_primary` finds the primary whatever
//! the URL's order, refuses a read-only server, and follows the standby once promoted. The
//! failover tests stop the primary hard (`pg_ctl stop -m immediate`, a crash) while three
//! instances run a per-second locked job, then promote the standby; each starts from a fresh
//! pair (`reset`), one test at a time. Needs `SHEDLOCK_TEST_PG_PRIMARY_URL` and
//! `SHEDLOCK_TEST_PG_STANDBY_URL`; skipped without them, failed without them when `CI=true`.

#![cfg(feature = "postgres")]

use std::collections::BTreeMap;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock_conformance::env::env_url;
use shedlock_conformance::unique_table;
use shedlock_core::{Error, LockConfiguration, LockProvider};
use shedlock_runtime::{Job, JobLock, JobRegistry, LockContext, Schedule, Scheduler};
use shedlock_sqlx::PgLockProvider;
use sqlx::Connection as _;

/// One test at a time on the pair.
static PAIR: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The pair's two URLs: `(primary, standby)`.
fn pair() -> Option<(String, String)> {
    let example = "eval \"$(bash .ci/postgres-standby.sh start)\"";
    let primary = env_url(
        "SHEDLOCK_TEST_PG_PRIMARY_URL",
        "PostgreSQL primary",
        example,
    )?;
    let standby = env_url(
        "SHEDLOCK_TEST_PG_STANDBY_URL",
        "PostgreSQL standby",
        example,
    )?;
    Some((primary, standby))
}

/// `host:port` of a single-host URL.
fn server(url: &str) -> &str {
    let rest = url.split_once("://").unwrap().1;
    let authority = &rest[..rest.find('/').unwrap_or(rest.len())];
    authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host)
}

/// Both servers in one URL, `first` first.
fn multi_host(first: &str, second: &str) -> String {
    let (scheme, rest) = first.split_once("://").unwrap();
    let user = rest.split_once('@').map_or("", |(user, _)| user);
    let path = &rest[rest.find('/').unwrap()..];
    format!(
        "{scheme}://{user}@{},{}{path}?target_session_attrs=read-write",
        server(first),
        server(second)
    )
}

/// Runs `.ci/postgres-standby.sh <command>`.
fn pair_script(command: &str) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/../.ci/postgres-standby.sh");
    let status = Command::new("bash")
        .args([script, command])
        .status()
        .unwrap();
    assert!(status.success(), "postgres-standby.sh {command}: {status}");
}

async fn sql(url: &str, statement: &str) {
    let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(statement.to_owned()))
        .execute(&mut connection)
        .await
        .unwrap();
}

async fn scalar(url: &str, query: &str) -> String {
    let mut connection = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query_scalar(sqlx::AssertSqlSafe(query.to_owned()))
        .fetch_one(&mut connection)
        .await
        .unwrap()
}

/// The error chain, one string.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finds_the_primary_and_refuses_a_standby() {
    let Some((primary, standby)) = pair() else {
        return;
    };
    let _pair = PAIR.lock().await;
    pair_script("reset");
    // The standby first: the provider goes on to the primary.
    let provider = PgLockProvider::connect_to_primary(&multi_host(&standby, &primary))
        .await
        .unwrap();
    assert_eq!(
        server(&primary),
        format!(
            "{}:{}",
            provider.pool().connect_options().get_host(),
            provider.pool().connect_options().get_port()
        )
    );
    let provider = PgLockProvider::builder(provider.pool().clone())
        .table(unique_table("standby_finds"))
        .build()
        .unwrap();
    provider.create_schema().await.unwrap();
    let config = LockConfiguration::new("finds", Duration::from_secs(5), Duration::ZERO).unwrap();
    assert!(provider.acquire(&config).await.unwrap().is_some());

    // Only the standby: no connection, an error naming it.
    let error = PgLockProvider::connect_to_primary(&standby)
        .await
        .unwrap_err();
    let text = chain(&error);
    assert!(
        text.contains(&format!("{} is read-only", server(&standby))),
        "{text}"
    );
    // A URL that asks for a read-only session is refused: locks are written.
    let read_only = multi_host(&standby, &primary).replace("read-write", "read-only");
    assert!(matches!(
        PgLockProvider::connect_to_primary(&read_only).await,
        Err(sqlx::Error::Configuration(_))
    ));
}

/// A primary made read-only under the provider's connection (a demotion that keeps the
/// sessions): the write it refuses ends that connection, the next one is checked, nothing is
/// granted while no server may write (the error names both), and once the standby is promoted
/// the provider works there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leaves_a_server_made_read_only_under_it() {
    let Some((primary, standby)) = pair() else {
        return;
    };
    let _pair = PAIR.lock().await;
    pair_script("reset");
    let pool = PgLockProvider::connect_to_primary(&multi_host(&primary, &standby))
        .await
        .unwrap()
        .pool()
        .clone();
    let provider = PgLockProvider::builder(pool)
        .table(unique_table("standby_read_only"))
        .build()
        .unwrap();
    provider.create_schema().await.unwrap();
    let config =
        |name| LockConfiguration::new(name, Duration::from_secs(5), Duration::ZERO).unwrap();
    assert!(provider.acquire(&config("before")).await.unwrap().is_some());

    sql(
        &primary,
        "ALTER SYSTEM SET default_transaction_read_only = on",
    )
    .await;
    sql(&primary, "SELECT pg_reload_conf()").await;
    for _ in 0..100 {
        if scalar(&primary, "SHOW transaction_read_only").await == "on" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let error = provider.acquire(&config("read-only")).await.unwrap_err();
    let text = chain(&error);
    assert!(
        text.contains(&format!("{} is read-only", server(&primary)))
            && text.contains(&format!("{} is read-only", server(&standby))),
        "{text}"
    );

    pair_script("promote");
    let mut granted = None;
    for _ in 0..100 {
        match provider.acquire(&config("after")).await {
            Ok(lease) => {
                granted = lease;
                break;
            }
            // The standby finishes its promotion.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
    assert!(granted.is_some(), "granted on the promoted standby");
    assert_eq!(
        provider.pool().connect_options().get_port().to_string(),
        server(&standby).rsplit(':').next().unwrap()
    );
}

/// One run of the job, as the job saw it.
#[derive(Debug, Clone)]
struct Run {
    tick: i64,
    token: u64,
    start_us: i64,
    end_us: i64,
}

fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as i64
}

/// Three instances of a per-second locked job on the pair; the primary crashes, the standby is
/// promoted. Returns the runs and prints what happened.
async fn failover(synchronous: bool) -> Option<Vec<Run>> {
    let (primary, standby) = pair()?;
    let _pair = PAIR.lock().await;
    pair_script("reset");
    if synchronous {
        sql(
            &primary,
            "ALTER SYSTEM SET synchronous_standby_names = 'standby'",
        )
        .await;
        sql(&primary, "SELECT pg_reload_conf()").await;
        for _ in 0..100 {
            let state = scalar(
                &primary,
                "SELECT coalesce(max(sync_state), '') FROM pg_stat_replication",
            )
            .await;
            if state == "sync" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let url = multi_host(&primary, &standby);
    let table = unique_table("standby_fleet");
    let runs: Arc<Mutex<Vec<Run>>> = Arc::default();
    let mut instances = Vec::new();
    for instance in 0..3 {
        let pool = PgLockProvider::connect_to_primary(&url)
            .await
            .unwrap()
            .pool()
            .clone();
        let provider = PgLockProvider::builder(pool)
            .table(&table)
            .holder(format!("instance-{instance}"))
            .build()
            .unwrap();
        provider.create_schema().await.unwrap();
        let runs = Arc::clone(&runs);
        let job = Job::new(
            "failover",
            Schedule::cron("* * * * * *").unwrap(),
            move |()| {
                let runs = Arc::clone(&runs);
                async move {
                    let start_us = now_us();
                    let token = LockContext::current().unwrap().fencing_token();
                    let tick = shedlock_runtime::RunContext::current()
                        .and_then(|run| run.tick())
                        .map_or(0, |t| {
                            t.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
                        });
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    runs.lock().unwrap().push(Run {
                        tick,
                        token,
                        start_us,
                        end_us: now_us(),
                    });
                }
            },
        )
        .with_lock(
            JobLock::new("failover")
                .unwrap()
                .lock_at_most_for(Duration::from_secs(10))
                .unwrap(),
        );
        let scheduler = Scheduler::builder()
            .provider(provider.clone())
            .registry(JobRegistry::new(()).add(job))
            .start()
            .await
            .unwrap();
        instances.push((scheduler, provider));
    }
    let ran = |after: i64| {
        let runs = Arc::clone(&runs);
        move || runs.lock().unwrap().iter().any(|r| r.start_us > after)
    };
    wait(ran(now_us() + 2_000_000)).await;

    pair_script("stop-primary");
    let down_us = now_us();
    // While no server may write, nothing is granted, and the error names both servers.
    let error = instances[0]
        .1
        .acquire(&LockConfiguration::new("probe", Duration::from_secs(1), Duration::ZERO).unwrap())
        .await
        .unwrap_err();
    let text = chain(&error);
    assert!(
        matches!(error, Error::Store { .. })
            && text.contains(&format!("{} is read-only", server(&standby)))
            && text.contains(server(&primary)),
        "{text}"
    );
    tokio::time::sleep(Duration::from_secs(1)).await; // the outage, before a failover manager acts
    pair_script("promote");
    let promoted_us = now_us();
    wait(ran(promoted_us + 2_000_000)).await;
    for (scheduler, _) in instances {
        scheduler.shutdown().await;
    }
    let runs = runs.lock().unwrap().clone();

    let mut per_tick: BTreeMap<i64, usize> = BTreeMap::new();
    for run in &runs {
        *per_tick.entry(run.tick).or_default() += 1;
    }
    let doubled = per_tick.values().filter(|&&n| n > 1).count();
    let mut by_start = runs.clone();
    by_start.sort_by_key(|r| r.start_us);
    let overlaps = by_start
        .windows(2)
        .filter(|w| w[1].start_us < w[0].end_us)
        .count();
    let tokens_back = by_start
        .windows(2)
        .filter(|w| w[1].token <= w[0].token)
        .count();
    let first_after = by_start
        .iter()
        .find(|r| r.start_us > promoted_us)
        .map(|r| (r.start_us - promoted_us) / 1000);
    println!(
        "{} replication: {} runs; primary down {} ms before the promotion; first run {:?} ms \
         after it; ticks run twice {doubled}, overlapping runs {overlaps}, tokens not above \
         the previous run's {tokens_back}",
        if synchronous {
            "synchronous"
        } else {
            "asynchronous"
        },
        runs.len(),
        (promoted_us - down_us) / 1000,
        first_after,
    );
    assert!(
        first_after.is_some(),
        "the fleet goes on on the new primary"
    );
    assert_eq!(tokens_back, 0, "fencing tokens never go back: {by_start:?}");
    if synchronous {
        assert_eq!((doubled, overlaps), (0, 0), "{by_start:?}");
    }
    Some(runs)
}

/// Waits until `condition` holds, checking every 50 ms; fails after 30 s.
async fn wait(condition: impl Fn() -> bool) {
    for _ in 0..600 {
        if condition() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("not within 30 s");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn synchronous_standby_promoted_no_double_grant() {
    failover(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asynchronous_standby_promoted_tokens_never_go_back() {
    failover(false).await;
}
