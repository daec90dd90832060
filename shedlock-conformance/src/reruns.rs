//! "A rerun never overlaps a live run", on any store, in real time: two schedulers share the
//! store and a job that asks for reruns of interrupted ticks (`OnInterrupted::Rerun`) and runs
//! every 6 s under a `lock_at_most_for` of 2 s. Each store's tests call the two scenarios with
//! its own providers:
//!
//! - [`a_run_past_lock_at_most_for_is_not_rerun_beside_itself`]: the first run outlives its
//!   lock (5 s); its run heartbeat goes on, so the other instance never runs the tick beside
//!   it, and the run's own success is what its record says.
//! - [`a_run_cut_from_its_store_stops_before_it_is_rerun`]: the instance running the first run
//!   loses the store (its proxies hold every byte) for 4 s, past its 1 s run heartbeat; it stops
//!   the run, and only then does the other instance run the tick again; the records say the
//!   first was interrupted and the second succeeded.
//!
//! A run's end is not when its future is dropped (a loaded runtime may drop it late) but its
//! last step: the job works in steps of 50 ms and notes each, and a run the scheduler stopped is
//! never polled again.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use shedlock_core::{LockProvider, RunOutcome, RunQuery, RunRecord};
use shedlock_runtime::{
    Job, JobLock, JobRegistry, LockContext, OnInterrupted, RunContext, Schedule, Scheduler,
    SchedulerConfig,
};
use tokio::sync::watch;
use tokio::time::Instant;

use crate::{CutProxy, ProxyMode};

/// One execution of the job: who, which tick and attempt, when it started, when it last took
/// a step, and when its future ended (returned or dropped).
#[derive(Debug, Clone)]
struct Span {
    holder: String,
    tick: Option<SystemTime>,
    attempt: u32,
    start: Instant,
    last_step: Instant,
    end: Option<Instant>,
}

/// The executions seen so far; `ended` counts those whose future ended.
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
        self.spans.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Waits until `count` executions ended: at most a minute, a hang is a failure.
    async fn ended(&self, count: usize) {
        let mut ended = self.ended.subscribe();
        let waited = tokio::time::timeout(
            Duration::from_secs(60),
            ended.wait_for(|ended| *ended >= count),
        )
        .await;
        assert!(
            waited.is_ok(),
            "{count} runs did not end: {:#?}",
            self.all()
        );
    }
}

/// Notes the end of a span when dropped.
struct Ending(Spans, usize);

impl Drop for Ending {
    fn drop(&mut self) {
        self.0.spans.lock().unwrap_or_else(|e| e.into_inner())[self.1].end = Some(Instant::now());
        self.0.ended.send_modify(|ended| *ended += 1);
    }
}

type OnFirst = Arc<dyn Fn(&str) + Send + Sync>;

/// The job `lock`: the first execution anywhere works `first` (calling `on_first` with its
/// holder as it starts), later ones 100 ms.
fn job(lock: &str, spans: &Spans, first: Duration, on_first: OnFirst) -> Job<()> {
    let spans = spans.clone();
    let every_6s = Schedule::cron("*/6 * * * * *").expect("a valid cron");
    Job::new(lock.to_owned(), every_6s, move |()| {
        let (spans, on_first) = (spans.clone(), Arc::clone(&on_first));
        async move {
            let holder = LockContext::current().expect("a locked job").holder();
            let run = RunContext::current().expect("a scheduled run");
            let index = {
                let mut all = spans.spans.lock().unwrap_or_else(|e| e.into_inner());
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
            let until = Instant::now() + work;
            while Instant::now() < until {
                tokio::time::sleep(Duration::from_millis(50)).await;
                ending.0.spans.lock().unwrap_or_else(|e| e.into_inner())[index].last_step =
                    Instant::now();
            }
        }
    })
    .with_lock(
        JobLock::new(lock.to_owned())
            .expect("a valid lock name")
            .lock_at_most_for(Duration::from_secs(2))
            .expect("a valid duration")
            .on_interrupted(OnInterrupted::Rerun),
    )
}

async fn start(provider: Arc<dyn LockProvider>, job: &Job<()>, run_lease: Duration) -> Scheduler {
    Scheduler::builder()
        .shared_provider(provider)
        .config(SchedulerConfig {
            run_lease,
            shutdown_grace_period: Duration::from_secs(1),
            shutdown_cancel_period: Duration::from_secs(1),
            ..SchedulerConfig::default()
        })
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

/// The records of `lock` for `tick`, oldest attempt first, read through `provider`.
async fn records_of(
    provider: &dyn LockProvider,
    lock: &str,
    tick: Option<SystemTime>,
) -> Vec<RunRecord> {
    let log = provider.run_log().expect("a store that keeps run records");
    let mut records = log
        .runs(&RunQuery::lock(lock).limit(64))
        .await
        .expect("read the run records");
    records.retain(|r| r.tick == tick);
    records.sort_by_key(|r| (r.fencing_token, r.attempt));
    records
}

/// Two instances (`a`, `b`: providers of one store as two holders) run the job `lock`, whose
/// first run outlives its lock: the tick runs once, and its record says it succeeded. `store`
/// names the store in the messages.
///
/// # Panics
/// When the tick ran again beside its live run, or its record says otherwise.
pub async fn a_run_past_lock_at_most_for_is_not_rerun_beside_itself(
    store: &str,
    lock: &str,
    a: Arc<dyn LockProvider>,
    b: Arc<dyn LockProvider>,
) {
    let spans = Spans::new();
    // 5 s: past the 2 s `lock_at_most_for`, within the 6 s between ticks.
    let job = job(lock, &spans, Duration::from_secs(5), Arc::new(|_: &str| {}));
    // 3 s heartbeats, renewed every second: a loaded machine may delay one renewal or two.
    let run_lease = Duration::from_secs(3);
    let one = start(Arc::clone(&a), &job, run_lease).await;
    let two = start(b, &job, run_lease).await;
    // The long run and the next tick's run.
    spans.ended(2).await;
    one.shutdown().await;
    two.shutdown().await;

    let spans = spans.all();
    let first = of_first_tick(&spans);
    assert_eq!(
        first.len(),
        1,
        "{store}: the tick ran again beside its live run (lock gone after 2 s, run 5 s): {spans:#?}"
    );
    let long = &first[0];
    assert!(
        long.last_step - long.start >= Duration::from_secs(5),
        "{store}: the long run was cut short: {spans:#?}"
    );
    let records = records_of(a.as_ref(), lock, long.tick).await;
    assert_eq!(
        records
            .iter()
            .map(|r| (r.attempt, r.outcome, r.holder.as_str()))
            .collect::<Vec<_>>(),
        [(1, RunOutcome::Succeeded, long.holder.as_str())],
        "{store}: the long run's own end is recorded: {records:#?}"
    );
}

/// The instance `cut_off` (whose every connection to the store goes through `proxies`) runs
/// the job `lock` alone until its first run starts; then it loses the store for 4 s and
/// `other` (a direct provider of the same store, another holder) starts: the first run stops
/// before the rerun starts, and the records say interrupted, then succeeded.
///
/// # Panics
/// When the rerun started while the first run still took steps, or the records say
/// otherwise.
pub async fn a_run_cut_from_its_store_stops_before_it_is_rerun(
    store: &str,
    lock: &str,
    cut_off: Arc<dyn LockProvider>,
    proxies: Vec<Arc<CutProxy>>,
    other: Arc<dyn LockProvider>,
) {
    let spans = Spans::new();
    let (started, mut first_started) = watch::channel(false);
    let proxies = Arc::new(proxies);
    // The first run (on `cut_off`, the only instance yet) loses the store for 4 s: longer
    // than its 1 s run heartbeat (and etcd's 2 s shortest lease), shorter than its 20 s of
    // work.
    let on_first: OnFirst = Arc::new(move |_: &str| {
        for proxy in proxies.iter() {
            proxy.set(ProxyMode::Blackhole);
        }
        let proxies = Arc::clone(&proxies);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(4)).await;
            for proxy in proxies.iter() {
                proxy.set(ProxyMode::Open);
            }
        });
        started.send_replace(true);
    });
    let job = job(lock, &spans, Duration::from_secs(20), on_first);
    let run_lease = Duration::from_secs(1);
    let one = start(cut_off, &job, run_lease).await;
    first_started
        .wait_for(|started| *started)
        .await
        .expect("the first run starts");
    // `other` starts while the job's latest run is unfinished: it follows that run.
    let two = start(Arc::clone(&other), &job, run_lease).await;
    // The cut run (stopped) and its rerun.
    spans.ended(2).await;
    one.shutdown().await;
    two.shutdown().await;

    let spans = spans.all();
    let first = of_first_tick(&spans);
    assert_eq!(first.len(), 2, "{store}: run once more: {spans:#?}");
    let (cut_run, rerun) = (&first[0], &first[1]);
    assert_ne!(cut_run.holder, rerun.holder, "{store}: {spans:#?}");
    assert_eq!(
        (cut_run.attempt, rerun.attempt),
        (1, 2),
        "{store}: {spans:#?}"
    );
    assert!(
        cut_run.last_step < rerun.start,
        "{store}: the rerun started while the first still ran: {spans:#?}"
    );
    assert!(
        cut_run.last_step - cut_run.start < Duration::from_secs(20),
        "{store}: stopped at its heartbeat, not at its end: {spans:#?}"
    );
    let records = records_of(other.as_ref(), lock, cut_run.tick).await;
    assert_eq!(
        records
            .iter()
            .map(|r| (r.attempt, r.outcome))
            .collect::<Vec<_>>(),
        [(1, RunOutcome::Interrupted), (2, RunOutcome::Succeeded)],
        "{store}: {records:#?}"
    );
}
