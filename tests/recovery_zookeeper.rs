//! Crash recovery on the ZooKeeper ensemble (`SHEDLOCK_TEST_ZK_URL`; skipped without it, failed
//! without it when `CI=true`): an instance dies inside a run — its tokio runtime is torn down on
//! its own thread, so nothing is renewed and nothing released, as for a killed process — and an
//! instance that starts meanwhile runs the interrupted tick again once its heartbeat lease is
//! gone. The other stores run the same scenario with real processes in
//! `shedlock-harness/tests/recovery_faults.rs`.

use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime};

use shedlock::{
    Job, JobLock, JobRegistry, LockContext, OnInterrupted, RunContext, RunOutcome, RunQuery,
    Schedule, Scheduler, SchedulerConfig, zookeeper::ZkLockProvider,
};
use shedlock_test_support::{unique_zk_root, zk_url};

/// What a run reports: holder, token, tick, attempt.
type Started = (String, u64, Option<SystemTime>, u32);

const RUN_LEASE: Duration = Duration::from_secs(3);

/// A job on a 10-second cron that reports each start; on the instance that `dies`, it then
/// hangs.
fn job(report: mpsc::Sender<Started>, dies: bool) -> Job<()> {
    Job::new(
        "zk_report",
        Schedule::cron("*/10 * * * * *").unwrap(),
        move |()| {
            let report = report.clone();
            async move {
                let lock = LockContext::current().expect("a locked run");
                let run = RunContext::current().expect("a scheduled run");
                let _ = report.send((
                    lock.holder(),
                    lock.fencing_token(),
                    run.tick(),
                    run.attempt(),
                ));
                if dies {
                    std::future::pending::<()>().await;
                }
            }
        },
    )
    .with_lock(
        JobLock::new("zk_report")
            .unwrap()
            .lock_at_most_for(Duration::from_secs(60))
            .unwrap()
            .on_interrupted(OnInterrupted::Rerun),
    )
}

async fn scheduler(
    url: &str,
    root: &str,
    holder: &str,
    job: Job<()>,
) -> (Scheduler, ZkLockProvider) {
    let provider = ZkLockProvider::builder(url)
        .root(root)
        .holder(holder)
        .connect()
        .await
        .expect("connect to SHEDLOCK_TEST_ZK_URL");
    provider.create_schema().await.expect("create the schema");
    let config = SchedulerConfig {
        run_lease: RUN_LEASE,
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::builder()
        .provider(provider.clone())
        .config(config)
        .registry(JobRegistry::new(()).add(job))
        .start()
        .await
        .expect("start the scheduler");
    (scheduler, provider)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_instance_died_is_rerun_on_zookeeper() {
    let Some(url) = zk_url() else {
        return;
    };
    let root = unique_zk_root("recovery");
    let (report, starts) = mpsc::channel();

    // The instance that dies, on a runtime of its own.
    let (die, dying) = std::sync::mpsc::channel::<()>();
    let victim = {
        let (url, root, report) = (url.clone(), root.clone(), report.clone());
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            let kept = runtime.block_on(scheduler(&url, &root, "victim", job(report, true)));
            dying.recv().unwrap();
            // Every task dropped where it stands: no renewal, no release, no end record.
            runtime.shutdown_background();
            drop(kept);
        })
    };
    let first = tokio::task::spawn_blocking(move || {
        let started = starts
            .recv_timeout(Duration::from_secs(30))
            .expect("a first run");
        (started, starts)
    });
    let ((holder, token, tick, attempt), starts) = first.await.unwrap();
    assert_eq!((holder.as_str(), attempt), ("victim", 1));

    // A survivor starts while the run is unfinished, then the victim dies.
    let (survivor, provider) = scheduler(&url, &root, "survivor", job(report, false)).await;
    die.send(()).unwrap();
    let died_at = Instant::now();
    victim.join().unwrap();

    let rerun = tokio::task::spawn_blocking(move || {
        starts
            .recv_timeout(Duration::from_secs(30))
            .expect("the rerun")
    })
    .await
    .unwrap();
    let waited = died_at.elapsed();
    survivor.shutdown().await;

    assert_eq!(rerun.0, "survivor");
    assert!(rerun.1 > token, "a newer token: {rerun:?} after {token}");
    assert_eq!(
        (rerun.2, rerun.3),
        (tick, 2),
        "the same tick, its second attempt"
    );
    println!(
        "recovery: zookeeper instance died mid-run, tick rerun after {} ms (run_lease {} ms)",
        waited.as_millis(),
        RUN_LEASE.as_millis()
    );
    let log = shedlock::LockProvider::run_log(&provider).expect("run records");
    let runs = log.runs(&RunQuery::lock("zk_report")).await.unwrap();
    let of_tick: Vec<(u32, RunOutcome)> = runs
        .iter()
        .filter(|r| r.tick == tick)
        .map(|r| (r.attempt, r.outcome))
        .collect();
    assert_eq!(
        of_tick,
        [(2, RunOutcome::Succeeded), (1, RunOutcome::Interrupted)],
        "{runs:#?}"
    );
}
