//! Issue 29, item 3 on the real ensemble: a rerun never runs a tick beside its live run. Two
//! schedulers share a ZooKeeper root; a job with `OnInterrupted::Rerun` runs every 6 s.
//!
//! - Its first run outlives `lock_at_most_for` (its lock is gone, its run heartbeat goes on):
//!   the other instance does not run the tick again, and the run's own success is recorded.
//! - The instance running it loses the ensemble (through a proxy) for longer than
//!   `run_lease`: it stops the run, and only then does the other instance run the tick again;
//!   the records say the first was interrupted and the rerun succeeded.
//!
//! Needs `SHEDLOCK_TEST_ZK_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use shedlock_core::conformance::unique_lock_name;
use shedlock_core::{
    Job, JobLock, JobRegistry, LockContext, OnInterrupted, RunContext, RunLog, RunOutcome,
    RunQuery, Schedule, Scheduler, SchedulerConfig,
};
use shedlock_test_support::{CutProxy, ProxyMode};
use shedlock_zookeeper::ZkLockProvider;
use tokio::sync::watch;
use tokio::time::Instant;

/// One execution of the job: who, which tick and attempt, when it started, when it last
/// took a step (a job stopped by the scheduler is no longer polled, but may be dropped later
/// on a loaded machine), and when it ended.
#[derive(Debug, Clone)]
struct Span {
    holder: String,
    tick: Option<SystemTime>,
    attempt: u32,
    start: Instant,
    last_step: Instant,
    end: Option<Instant>,
}

/// The executions seen so far; `ended` counts those that ended.
#[derive(Clone)]
struct Spans {
    spans: Arc<Mutex<Vec<Span>>>,
    ended: watch::Sender<usize>,
}

impl Spans {
    fn new() -> Self {
        Spans {
            spans: Arc::default(),
            ended: watch::channel(0).0,
        }
    }

    fn all(&self) -> Vec<Span> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits until `count` executions ended (at most `within`).
    async fn ended(&self, count: usize, within: Duration) {
        let mut ended = self.ended.subscribe();
        let waited = tokio::time::timeout(within, ended.wait_for(|ended| *ended >= count)).await;
        assert!(
            waited.is_ok(),
            "{count} runs did not end: {:#?}",
            self.all()
        );
    }
}

/// Marks the end of a span when dropped (the run returned, or was stopped).
struct Ending(Spans, usize);

impl Drop for Ending {
    fn drop(&mut self) {
        self.0.spans.lock().unwrap()[self.1].end = Some(Instant::now());
        self.0.ended.send_modify(|ended| *ended += 1);
    }
}

/// The job: the first execution anywhere takes `first` (calling `on_first` with its holder as
/// it starts), later ones 100 ms.
fn job(
    name: &str,
    spans: &Spans,
    first: Duration,
    on_first: impl Fn(&str) + Send + Sync + 'static,
) -> Job<()> {
    let (spans, on_first) = (spans.clone(), Arc::new(on_first));
    let every_6s = Schedule::cron("*/6 * * * * *").unwrap();
    Job::new(name.to_owned(), every_6s, move |()| {
        let (spans, on_first) = (spans.clone(), Arc::clone(&on_first));
        async move {
            let holder = LockContext::current().expect("a locked job").holder();
            let run = RunContext::current().expect("a scheduled run");
            let index = {
                let mut all = spans.spans.lock().unwrap();
                all.push(Span {
                    holder: holder.clone(),
                    tick: run.tick(),
                    attempt: run.attempt(),
                    start: Instant::now(),
                    last_step: Instant::now(),
                    end: None,
                });
                all.len() - 1
            };
            let work = if index == 0 {
                on_first(&holder);
                first
            } else {
                Duration::from_millis(100)
            };
            let ending = Ending(spans, index);
            // Steps of 50 ms, each noted: the last one shows when the run last ran.
            let until = Instant::now() + work;
            while Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(50)).await;
                ending.0.spans.lock().unwrap()[index].last_step = Instant::now();
            }
        }
    })
    .with_lock(
        JobLock::new(name.to_owned())
            .unwrap()
            .lock_at_most_for(Duration::from_secs(2))
            .unwrap()
            .on_interrupted(OnInterrupted::Rerun),
    )
}

/// Run heartbeats of `run_lease` (renewed every third), short shutdowns.
fn config(run_lease: Duration) -> SchedulerConfig {
    SchedulerConfig {
        run_lease,
        shutdown_grace_period: Duration::from_secs(1),
        shutdown_cancel_period: Duration::from_secs(1),
        ..SchedulerConfig::default()
    }
}

async fn start(provider: ZkLockProvider, job: &Job<()>, run_lease: Duration) -> Scheduler {
    Scheduler::builder()
        .provider(provider)
        .config(config(run_lease))
        .registry(JobRegistry::new(()).add(job.clone()))
        .start()
        .await
        .expect("start a scheduler")
}

/// The executions of the first execution's tick.
fn of_first_tick(spans: &[Span]) -> Vec<Span> {
    let tick = spans[0].tick;
    spans.iter().filter(|s| s.tick == tick).cloned().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_lock_at_most_for_is_not_run_again_beside_itself() {
    let Some(provider) = common::provider("rerun-long").await else {
        return;
    };
    let name = unique_lock_name("long");
    let spans = Spans::new();
    // 5 s: past the 2 s `lock_at_most_for`, within the 6 s between ticks.
    let job = job(&name, &spans, Duration::from_secs(5), |_| {});
    // 3 s heartbeats, renewed every second: a loaded machine may delay one renewal or two.
    let run_lease = Duration::from_secs(3);
    let a = start(provider.with_holder("a").unwrap(), &job, run_lease).await;
    let b = start(provider.with_holder("b").unwrap(), &job, run_lease).await;
    // The long run and the next tick's run.
    spans.ended(2, Duration::from_secs(30)).await;
    a.shutdown().await;
    b.shutdown().await;

    let spans = spans.all();
    let first = of_first_tick(&spans);
    assert_eq!(first.len(), 1, "the tick ran again: {spans:#?}");
    let long = &first[0];
    let took = long.end.unwrap() - long.start;
    assert!(took >= Duration::from_secs(5), "{spans:#?}");
    let records = provider.runs(&RunQuery::lock(&name)).await.unwrap();
    let of_tick: Vec<_> = records.iter().filter(|r| r.tick == long.tick).collect();
    assert_eq!(of_tick.len(), 1, "{records:#?}");
    assert_eq!(
        (
            of_tick[0].attempt,
            of_tick[0].outcome,
            of_tick[0].holder.as_str()
        ),
        (1, RunOutcome::Succeeded, long.holder.as_str()),
        "the long run's own end stays: {records:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_from_the_ensemble_stops_before_it_is_run_again() {
    let Some(provider) = common::provider("rerun-cut").await else {
        return;
    };
    let upstream = common::zk_url().unwrap();
    let upstream = upstream.split(',').next().unwrap().to_owned();
    let proxy = Arc::new(CutProxy::start(&upstream).await.unwrap());
    let cut_off = ZkLockProvider::builder(proxy.addr().to_string())
        .root(provider.root())
        .holder("a")
        .request_timeout(Duration::from_millis(800))
        .connect()
        .await
        .unwrap();
    let name = unique_lock_name("cut");
    let spans = Spans::new();
    let (started, mut first_started) = watch::channel(false);
    // The first run (on `a`, the only instance yet) loses the ensemble for 4 s: longer than
    // its 1 s run heartbeat, shorter than its 20 s of work.
    let cut = Arc::clone(&proxy);
    let job = job(&name, &spans, Duration::from_secs(20), move |holder| {
        assert_eq!(holder, "a");
        cut.set(ProxyMode::Blackhole);
        let cut = Arc::clone(&cut);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(4)).await;
            cut.set(ProxyMode::Open);
        });
        started.send_replace(true);
    });
    let run_lease = Duration::from_secs(1);
    let a = start(cut_off, &job, run_lease).await;
    first_started.wait_for(|started| *started).await.unwrap();
    // `b` starts while the job's latest run is unfinished: it follows that run.
    let b = start(provider.with_holder("b").unwrap(), &job, run_lease).await;
    // The cut run (stopped) and its rerun.
    spans.ended(2, Duration::from_secs(30)).await;
    a.shutdown().await;
    b.shutdown().await;

    let spans = spans.all();
    let first = of_first_tick(&spans);
    assert_eq!(first.len(), 2, "run once more: {spans:#?}");
    let (cut_run, rerun) = (&first[0], &first[1]);
    assert_eq!((cut_run.holder.as_str(), rerun.holder.as_str()), ("a", "b"));
    assert_eq!((cut_run.attempt, rerun.attempt), (1, 2), "{spans:#?}");
    assert!(
        cut_run.last_step < rerun.start,
        "the rerun started while the first still ran: {spans:#?}"
    );
    assert!(
        cut_run.last_step - cut_run.start < Duration::from_secs(20),
        "stopped at its heartbeat, not at its end: {spans:#?}"
    );
    let records = provider.runs(&RunQuery::lock(&name)).await.unwrap();
    let mut of_tick: Vec<_> = records
        .iter()
        .filter(|r| r.tick == cut_run.tick)
        .map(|r| (r.attempt, r.outcome))
        .collect();
    of_tick.sort_by_key(|(attempt, _)| *attempt);
    assert_eq!(
        of_tick,
        [(1, RunOutcome::Interrupted), (2, RunOutcome::Succeeded)],
        "{records:#?}"
    );
}
