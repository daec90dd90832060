//! The network between an instance and its database: unreachable at startup (refused, or a
//! port that accepts and never answers), and cut while the instance leads an election or holds
//! a lock with keep-alive (a proxy on 127.0.0.1 in front of that one instance).

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use shedlock::{
    ElectionConfig, Job, JobLock, JobRegistry, LockEvent, Schedule, Scheduler, sql::PgLockProvider,
};
use shedlock_conformance::{CutProxy, ProxyMode, upstream_of, url_at};
use shedlock_harness::{
    Backend, Event, Run, StoreConfig, WorkerOptions, WriteOutcome, database_url, now_us,
};
use tokio::net::TcpListener;

use common::{EXE, PATIENCE, Scenario, assert_passed};

/// An address on 127.0.0.1 where nothing listens (connections are refused).
async fn closed_port() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    listener.local_addr().unwrap()
}

/// How long the startup tests let a connection attempt take.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(2);

/// Runs a worker on `url` and returns its exit status, stdout and the time it took; panics if
/// it neither connects nor gives up within `bound`.
async fn run_worker_until_exit(
    backend: Backend,
    url: &str,
    retries: u32,
    bound: Duration,
) -> (std::process::ExitStatus, String, Duration) {
    let store = StoreConfig {
        backend,
        url: url.to_owned(),
        lock_table: "shedlock_unreachable".into(),
        journal_table: "journal_unreachable".into(),
        holder: "lonely".into(),
        max_connections: 1,
        acquire_timeout: ACQUIRE_TIMEOUT,
    };
    let mut options = WorkerOptions::new(store, vec!["nothing".into()]);
    options.connect_retries = retries;
    let started = Instant::now();
    let child = tokio::process::Command::new(EXE)
        .arg("worker")
        .args(options.to_args())
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(bound, child)
        .await
        .unwrap_or_else(|_| {
            panic!("the worker on {url} neither connected nor gave up within {bound:?}")
        })
        .unwrap();
    (
        output.status,
        String::from_utf8_lossy(&output.stdout).into_owned(),
        started.elapsed(),
    )
}

fn fatal_line(stdout: &str) -> &str {
    stdout
        .lines()
        .find(|l| l.starts_with("fatal "))
        .unwrap_or_else(|| panic!("no fatal line:\n{stdout}"))
}

/// Refused connections: sqlx's pool retries them silently until its acquire timeout and then
/// says only "pool timed out"; the error names the database, the address and the real cause,
/// within the acquire timeout. SQLite: a file that cannot be opened fails at once.
#[tokio::test]
async fn unreachable_database_at_startup_is_a_clear_error() {
    let port = closed_port().await.port();
    let cases = [
        (
            Backend::Postgres,
            format!("postgres://root@127.0.0.1:{port}/test"),
            "Connection refused",
        ),
        (
            Backend::MySql,
            format!("mysql://root@127.0.0.1:{port}/test"),
            "Connection refused",
        ),
        (
            Backend::Sqlite,
            "sqlite:///nonexistent-dir/x/locks.db".to_owned(),
            "unable to open database file",
        ),
    ];
    let bound = ACQUIRE_TIMEOUT + Duration::from_secs(3);
    for (backend, url, cause) in cases {
        let (status, stdout, took) = run_worker_until_exit(backend, &url, 0, bound).await;
        assert!(
            !status.success(),
            "{backend}: the worker started without a database"
        );
        let fatal = fatal_line(&stdout);
        assert!(
            fatal.contains(&format!("cannot connect to {backend} at {url}")),
            "{fatal}"
        );
        assert!(fatal.contains(cause), "{fatal}");
        println!("{backend}: gave up after {took:?}: {fatal}");
    }
}

/// A port that accepts connections and never answers (a hung server, a half-open firewall):
/// the acquire timeout bounds the wait, and the error says nothing answered.
#[tokio::test]
async fn silent_database_at_startup_fails_within_the_acquire_timeout() {
    let tarpit = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = tarpit.local_addr().unwrap().port();
    let held = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = tarpit.accept().await {
            held.push(socket);
        }
    });
    for (backend, scheme) in [(Backend::Postgres, "postgres"), (Backend::MySql, "mysql")] {
        let url = format!("{scheme}://root@127.0.0.1:{port}/test");
        let bound = ACQUIRE_TIMEOUT * 2 + Duration::from_secs(3);
        let (status, stdout, took) = run_worker_until_exit(backend, &url, 0, bound).await;
        assert!(!status.success());
        let fatal = fatal_line(&stdout);
        assert!(
            fatal.contains("pool timed out") && fatal.contains("no answer"),
            "{fatal}"
        );
        assert!(took >= ACQUIRE_TIMEOUT, "{backend}: {took:?}");
        println!("{backend}: gave up after {took:?}: {fatal}");
    }
    held.abort();
}

/// With retries configured, the worker reports each failed attempt, backs off, and starts once
/// the database becomes reachable (here: after more than one acquire timeout).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retries_until_the_database_becomes_reachable() {
    let Some(url) = database_url(Backend::Postgres) else {
        return;
    };
    let closed = closed_port().await;
    let direct = upstream_of(&url).unwrap();
    let through = url_at(&url, closed).unwrap();
    let worker = tokio::spawn(async move {
        run_worker_until_exit(Backend::Postgres, &through, 6, Duration::from_secs(30)).await
    });
    tokio::time::sleep(ACQUIRE_TIMEOUT + Duration::from_millis(1_500)).await;
    let proxy = CutProxy::bind(closed, &direct).await.unwrap();
    let (status, stdout, _) = worker.await.unwrap();
    drop(proxy);
    assert!(status.success(), "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("connect_failed attempt=1 ")),
        "expected a failed attempt before the database came up:\n{stdout}"
    );
    assert!(stdout.lines().any(|l| l.starts_with("ready ")), "{stdout}");
}

/// The library itself on a pool that cannot connect yet (`connect_lazy`): the scheduler starts,
/// each tick ends as a store error (an event and a warning) within the acquire timeout, nothing
/// panics, and jobs run once the database is reachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduler_rides_out_an_unreachable_database() {
    let Some(url) = database_url(Backend::Postgres) else {
        return;
    };
    let run = Run::create(Backend::Postgres, &url).await.unwrap();
    let direct = upstream_of(&url).unwrap();
    let closed = closed_port().await;
    let pool = sqlx::postgres::PgPoolOptions::new()
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_lazy(&url_at(&url, closed).unwrap())
        .unwrap();
    let provider = PgLockProvider::builder(pool)
        .table(&run.lock_table)
        .build()
        .unwrap();
    let failures = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&failures);
    let job = Job::new(
        "unreachable",
        Schedule::fixed_rate(Duration::from_millis(300)).unwrap(),
        |()| async {},
    )
    .with_lock(JobLock::new("harness_unreachable").unwrap());
    let started = Instant::now();
    let scheduler = Scheduler::builder()
        .provider(provider)
        .listener(move |event: &LockEvent<'_>| {
            if matches!(event, LockEvent::AcquireFailed { .. }) {
                counted.fetch_add(1, Ordering::SeqCst);
            }
        })
        .registry(JobRegistry::new(()).add(job))
        .start()
        .await
        .expect("the scheduler starts without its database");
    while failures.load(Ordering::SeqCst) == 0 {
        assert!(
            started.elapsed() < ACQUIRE_TIMEOUT * 3,
            "no store error reported: {:?}",
            scheduler.status()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    println!("first store error after {:?}", started.elapsed());
    assert_eq!(scheduler.status()[0].executions, 0);

    let proxy = CutProxy::bind(closed, &direct).await.unwrap();
    let deadline = Instant::now() + PATIENCE;
    while scheduler.status()[0].executions == 0 {
        assert!(
            Instant::now() < deadline,
            "never ran: {:?}",
            scheduler.status()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    scheduler.shutdown().await;
    drop(proxy);
    run.cleanup().await;
}

/// A run on `backend` without workers yet (not checked tick by tick), and a cut-proxy in front
/// of its database with the URL through it, for the worker whose network fails; `None` when the
/// database is not configured.
async fn behind_a_proxy(backend: Backend) -> Option<(Scenario, CutProxy, String)> {
    let mut s = Scenario::new(backend).await?;
    s.check_ticks = false;
    let proxy = CutProxy::start(&upstream_of(&s.run.url).unwrap())
        .await
        .unwrap();
    let through = proxy.url_through(&s.run.url).unwrap();
    Some((s, proxy, through))
}

/// Election timing short enough for a test: lease 3 s, renew deadline 2 s, retry 500 ms.
const TIMING: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_secs(3),
    renew_deadline: Duration::from_secs(2),
    retry_period: Duration::from_millis(500),
};

/// The leader's connections go silent (no resets: statements just hang). It must step down at
/// its renew deadline, before its lease can expire and another candidate be elected.
async fn leader_cut_off_steps_down_before_another_is_elected(backend: Backend) {
    let Some((mut s, proxy, through)) = behind_a_proxy(backend).await else {
        return;
    };
    let election = &["harness_leader"];
    let a = s
        .spawn(election, |o| {
            o.election = Some(TIMING);
            o.store.url = through.clone();
        })
        .await;
    s.wait(0, PATIENCE, "the first worker to lead", |r| {
        (r.worker == a && matches!(r.event, Event::Leader { .. })).then_some(())
    })
    .await;
    for _ in 0..2 {
        s.spawn(election, |o| o.election = Some(TIMING)).await;
    }
    s.fleet.collect_for(TIMING.retry_period * 2).await;

    let cut_from = s.fleet.events().len();
    proxy.set(ProxyMode::Blackhole);
    let cut_at = now_us();
    let stepped_down = s
        .wait(
            cut_from,
            PATIENCE,
            "the cut-off leader to step down",
            |r| match r.event {
                Event::Follower { at } if r.worker == a => Some(at),
                _ => None,
            },
        )
        .await;
    let elected = s
        .wait(cut_from, PATIENCE, "another leader", |r| match r.event {
            Event::Leader { at, .. } if r.worker != a => Some(at),
            _ => None,
        })
        .await;
    assert!(
        stepped_down < elected,
        "the new leader was elected {} ms before the cut-off one stepped down",
        (stepped_down - elected) / 1000
    );
    let step_down_ms = (stepped_down - cut_at) / 1000;
    let bound = (TIMING.renew_deadline + TIMING.retry_period).as_millis() as i64 + 500;
    assert!(
        step_down_ms <= bound,
        "stepped down {step_down_ms} ms after the cut"
    );
    println!(
        "{backend}: cut-off leader stepped down after {step_down_ms} ms; new leader after {} ms",
        (elected - cut_at) / 1000
    );
    // Resets end the statements still hanging, so the cut-off worker can stop.
    proxy.set(ProxyMode::Reset);
    let report = s.finish().await;
    assert_passed(&report);
    assert!(report.terms >= 2, "{report}");
}

/// The holder of a lock kept alive by extensions loses its connection (resets). Its extensions
/// fail, its lost-lock signal fires at its local deadline, which comes before the store lets
/// another instance take the lock; the others continue; its late write is not accepted.
async fn keep_alive_holder_cut_off_is_told_before_takeover(backend: Backend) {
    let Some((mut s, proxy, through)) = behind_a_proxy(backend).await else {
        return;
    };
    let long_job = |o: &mut WorkerOptions| {
        o.job = Duration::from_secs(6);
        o.lease = Duration::from_secs(2);
        o.at_least = Duration::ZERO;
        o.keep_alive = true;
    };
    let lock = &["harness_long"];
    let a = s
        .spawn(lock, |o| {
            long_job(o);
            o.store.url = through.clone();
        })
        .await;
    let (token, started) = s
        .wait(0, PATIENCE, "the first worker to start", |r| {
            match r.event {
                Event::Start { token, at, .. } if r.worker == a => Some((token, at)),
                _ => None,
            }
        })
        .await;
    let b = s.spawn(lock, long_job).await;
    // Kept alive past lock_at_most_for: the other worker is skipped meanwhile.
    let kept_until = started + 3_000_000;
    s.fleet
        .collect_for(Duration::from_micros((kept_until - now_us()).max(0) as u64))
        .await;
    assert!(
        !s.fleet
            .events()
            .iter()
            .any(|r| r.worker == b && matches!(r.event, Event::Start { .. })),
        "the lock was taken while its holder kept it alive"
    );

    let cut_from = s.fleet.events().len();
    proxy.set(ProxyMode::Reset);
    let cut_at = now_us();
    let lost_at = s
        .wait(cut_from, PATIENCE, "the lost-lock signal", |r| {
            match r.event {
                Event::Lost { token: t, at, .. } if r.worker == a && t == token => Some(at),
                _ => None,
            }
        })
        .await;
    let (next_token, taken_at) = s
        .wait(
            cut_from,
            PATIENCE,
            "the other worker to take over",
            |r| match r.event {
                Event::Start { token, at, .. } if r.worker == b => Some((token, at)),
                _ => None,
            },
        )
        .await;
    assert!(next_token > token, "token {next_token} after {token}");
    assert!(
        lost_at <= taken_at,
        "the lock was taken over {} ms before its cut-off holder was told",
        (lost_at - taken_at) / 1000
    );
    let outcome = s
        .wait(
            cut_from,
            PATIENCE,
            "the cut-off worker's write",
            |r| match &r.event {
                Event::Write {
                    token: t, outcome, ..
                } if r.worker == a && *t == token => Some(outcome.clone()),
                _ => None,
            },
        )
        .await;
    assert_ne!(outcome, WriteOutcome::Accepted);
    println!(
        "{backend}: lost-lock signal {} ms after the cut, takeover {} ms after it",
        (lost_at - cut_at) / 1000,
        (taken_at - cut_at) / 1000
    );
    let report = s.finish().await;
    assert_passed(&report);
    assert!(report.lost_signals >= 1, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_leader_cut_off_steps_down_before_another_is_elected() {
    leader_cut_off_steps_down_before_another_is_elected(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_leader_cut_off_steps_down_before_another_is_elected() {
    leader_cut_off_steps_down_before_another_is_elected(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_keep_alive_holder_cut_off_is_told_before_takeover() {
    keep_alive_holder_cut_off_is_told_before_takeover(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_keep_alive_holder_cut_off_is_told_before_takeover() {
    keep_alive_holder_cut_off_is_told_before_takeover(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_leader_cut_off_steps_down_before_another_is_elected() {
    leader_cut_off_steps_down_before_another_is_elected(Backend::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_keep_alive_holder_cut_off_is_told_before_takeover() {
    keep_alive_holder_cut_off_is_told_before_takeover(Backend::Redis).await;
}
