//! A rerun never overlaps a live run (issue 29 item 3), on Redis and RedLock, in real time:
//! two instances, a job that asks for reruns of interrupted ticks (`OnInterrupted::Rerun`),
//! run heartbeats kept in the run records on Redis's clock.
//!
//! - A run that goes on past `lock_at_most_for` loses its lock but keeps its run heartbeat:
//!   the other instance never runs the tick beside it; its own success is what the record says.
//! - A run whose instance loses the server (RedLock: every master) for longer than its run
//!   lease, through proxies that hold its traffic, stops before its heartbeat can pass in
//!   Redis; only then does the other instance run the tick again; the records say the first
//!   was interrupted and the second succeeded.
//!
//! Needs `SHEDLOCK_TEST_REDIS_URL` and `SHEDLOCK_TEST_REDLOCK_URLS`; skipped without them,
//! failed without them when `CI=true`.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::{redis_url, redlock_urls, unique_key_prefix};
use shedlock_core::{
    Job, JobLock, JobRegistry, LockContext, LockProvider, OnInterrupted, RunContext, RunOutcome,
    RunQuery, RunRecord, Schedule, Scheduler, SchedulerConfig,
};
use shedlock_redis::{RedLockProvider, RedisLockProvider};
use shedlock_test_support::{CutProxy, ProxyMode, upstream_of};
use tokio::sync::mpsc;

const RUN_LEASE: Duration = Duration::from_secs(1);
const LOCK: &str = "live_run";

fn since_epoch() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

/// One run as the job saw it: holder, tick, attempt, start and end (since the epoch; the end
/// is taken when the run's future completes or is dropped).
#[derive(Debug, Clone)]
struct Span {
    holder: String,
    tick: Option<SystemTime>,
    attempt: u32,
    start: Duration,
    end: Option<Duration>,
}

#[derive(Clone, Default)]
struct Spans(Arc<Mutex<Vec<Span>>>);

/// Notes the end of span `index` when dropped, and says so on `ended`.
struct EndOf {
    spans: Spans,
    index: usize,
    ended: mpsc::UnboundedSender<usize>,
}

impl Drop for EndOf {
    fn drop(&mut self) {
        self.spans.0.lock().unwrap()[self.index].end = Some(since_epoch());
        let _ = self.ended.send(self.index);
    }
}

impl Spans {
    fn begin(&self, ended: &mpsc::UnboundedSender<usize>) -> (EndOf, usize) {
        let lock = LockContext::current().expect("a locked run");
        let run = RunContext::current().expect("a scheduled run");
        let mut spans = self.0.lock().unwrap();
        spans.push(Span {
            holder: lock.holder(),
            tick: run.tick(),
            attempt: run.attempt(),
            start: since_epoch(),
            end: None,
        });
        let index = spans.len() - 1;
        let end = EndOf {
            spans: self.clone(),
            index,
            ended: ended.clone(),
        };
        (end, index)
    }

    fn get(&self) -> Vec<Span> {
        self.0.lock().unwrap().clone()
    }
}

/// A job every 10 seconds under a lock of `lock_at_most_for` 2 s that reruns interrupted ticks;
/// its first run takes `first` (calling `on_first` with its holder first), later runs 200 ms.
fn job(
    spans: &Spans,
    ended: &mpsc::UnboundedSender<usize>,
    first: Duration,
    on_first: Arc<dyn Fn(&str) + Send + Sync>,
) -> Job<()> {
    let (spans, ended) = (spans.clone(), ended.clone());
    Job::new(LOCK, Schedule::cron("*/10 * * * * *").unwrap(), move |()| {
        let (spans, ended, on_first) = (spans.clone(), ended.clone(), Arc::clone(&on_first));
        async move {
            let (_end, index) = spans.begin(&ended);
            if index == 0 {
                on_first(&LockContext::current().unwrap().holder());
                tokio::time::sleep(first).await;
            } else {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    })
    .with_lock(
        JobLock::new(LOCK)
            .unwrap()
            .lock_at_most_for(Duration::from_secs(2))
            .unwrap()
            .on_interrupted(OnInterrupted::Rerun),
    )
}

async fn start(provider: Arc<dyn LockProvider>, job: &Job<()>) -> Scheduler {
    Scheduler::builder()
        .shared_provider(provider)
        .config(SchedulerConfig {
            run_lease: RUN_LEASE,
            shutdown_grace_period: Duration::from_secs(1),
            shutdown_cancel_period: Duration::from_secs(1),
            ..SchedulerConfig::default()
        })
        .registry(JobRegistry::new(()).add(job.clone()))
        .start()
        .await
        .unwrap()
}

/// Waits (at most a minute: a hang is a failure, not a wait) until `count` runs ended.
async fn ended(receiver: &mut mpsc::UnboundedReceiver<usize>, count: usize, spans: &Spans) {
    for _ in 0..count {
        let next = tokio::time::timeout(Duration::from_secs(60), receiver.recv()).await;
        assert!(
            matches!(next, Ok(Some(_))),
            "runs did not end: {:#?}",
            spans.get()
        );
    }
}

/// The records of `tick`, oldest first.
async fn records_of(provider: &dyn LockProvider, tick: Option<SystemTime>) -> Vec<RunRecord> {
    let log = provider.run_log().expect("Redis keeps run records");
    let mut records = log.runs(&RunQuery::lock(LOCK)).await.unwrap();
    records.retain(|r| r.tick == tick);
    records.reverse();
    records
}

/// Two instances (`a`, `b`) of one store: a first run of 5 s under a lock of 2 s runs once.
async fn past_lock_at_most_for(a: Arc<dyn LockProvider>, b: Arc<dyn LockProvider>) {
    let (spans, (tx, mut rx)) = (Spans::default(), mpsc::unbounded_channel());
    let job = job(&spans, &tx, Duration::from_secs(5), Arc::new(|_: &str| {}));
    let (one, two) = (start(Arc::clone(&a), &job).await, start(b, &job).await);
    ended(&mut rx, 1, &spans).await;
    one.shutdown().await;
    two.shutdown().await;

    let spans = spans.get();
    let first = &spans[0];
    let of_tick: Vec<&Span> = spans.iter().filter(|s| s.tick == first.tick).collect();
    assert_eq!(
        of_tick.len(),
        1,
        "the tick ran again beside its live run (lock gone after 2 s, run 5 s): {spans:#?}"
    );
    let records = records_of(a.as_ref(), first.tick).await;
    assert_eq!(
        records
            .iter()
            .map(|r| (r.attempt, r.outcome))
            .collect::<Vec<_>>(),
        [(1, RunOutcome::Succeeded)],
        "the long run's own end is recorded: {records:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_lock_at_most_for_is_not_rerun_beside_itself() {
    let Some(url) = redis_url() else { return };
    let prefix = unique_key_prefix("live");
    let connect = |holder: &'static str| {
        let (url, prefix) = (url.clone(), prefix.clone());
        async move {
            let provider = RedisLockProvider::builder()
                .key_prefix(prefix)
                .holder(holder)
                .connect(&url)
                .await
                .unwrap();
            Arc::new(provider) as Arc<dyn LockProvider>
        }
    };
    past_lock_at_most_for(connect("instance-a").await, connect("instance-b").await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redlock_a_run_past_lock_at_most_for_is_not_rerun_beside_itself() {
    let Some(urls) = redlock_urls() else { return };
    let prefix = unique_key_prefix("live-redlock");
    let connect = |holder: &'static str| {
        let (urls, prefix) = (urls.clone(), prefix.clone());
        async move {
            let provider = RedLockProvider::builder()
                .key_prefix(prefix)
                .holder(holder)
                .connect(&urls)
                .await
                .unwrap();
            Arc::new(provider) as Arc<dyn LockProvider>
        }
    };
    past_lock_at_most_for(connect("instance-a").await, connect("instance-b").await).await;
}

/// Each instance's proxies, by holder.
type Proxies = Vec<(&'static str, Vec<Arc<CutProxy>>)>;

/// Two instances (`instances`, holders `instance-a` and `instance-b`, each through its own
/// `proxies` to every server): the first run's instance loses the servers for 3 s (three run
/// leases) while its run would go on for 30 s; the run stops before the other instance reruns
/// the tick, and `reader` finds the records of both.
async fn cut_from_the_store(
    instances: Vec<Arc<dyn LockProvider>>,
    proxies: Proxies,
    reader: &dyn LockProvider,
) {
    let proxies = Arc::new(proxies);
    // Its commands hang: the proxies forward nothing, and close nothing.
    let cut: Arc<dyn Fn(&str) + Send + Sync> = {
        let proxies = Arc::clone(&proxies);
        Arc::new(move |holder: &str| {
            let (_, of_holder) = proxies.iter().find(|(h, _)| *h == holder).unwrap();
            for proxy in of_holder {
                proxy.set(ProxyMode::Blackhole);
            }
            let of_holder = of_holder.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(3)).await;
                for proxy in of_holder {
                    proxy.set(ProxyMode::Open);
                }
            });
        })
    };
    let (spans, (tx, mut rx)) = (Spans::default(), mpsc::unbounded_channel());
    let job = job(&spans, &tx, Duration::from_secs(30), cut);
    let mut schedulers = Vec::new();
    for instance in &instances {
        schedulers.push(start(Arc::clone(instance), &job).await);
    }
    ended(&mut rx, 2, &spans).await;
    for scheduler in &schedulers {
        scheduler.shutdown().await;
    }

    let spans = spans.get();
    let (first, rerun) = (&spans[0], &spans[1]);
    assert_eq!(
        (rerun.tick, rerun.attempt),
        (first.tick, 2),
        "the second run is the tick's rerun: {spans:#?}"
    );
    assert_ne!(first.holder, rerun.holder, "{spans:#?}");
    let first_end = first.end.expect("the cut run stopped");
    assert!(
        first_end <= rerun.start,
        "the rerun started {:?} before the cut run stopped: {spans:#?}",
        first_end - rerun.start
    );
    assert!(
        first_end < first.start + Duration::from_secs(30),
        "the cut run was stopped at its heartbeat, not at its end: {spans:#?}"
    );
    let records = records_of(reader, first.tick).await;
    assert_eq!(
        records
            .iter()
            .map(|r| (r.attempt, r.outcome))
            .collect::<Vec<_>>(),
        [(1, RunOutcome::Interrupted), (2, RunOutcome::Succeeded)],
        "{records:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_cut_from_redis_stops_before_it_is_rerun() {
    let Some(url) = redis_url() else { return };
    let prefix = unique_key_prefix("live-cut");
    let upstream = upstream_of(&url).expect("a server URL");
    let (mut instances, mut proxies): (_, Proxies) = (Vec::new(), Vec::new());
    for holder in ["instance-a", "instance-b"] {
        let proxy = Arc::new(CutProxy::start(&upstream).await.unwrap());
        let provider = RedisLockProvider::builder()
            .key_prefix(&prefix)
            .holder(holder)
            .connect(&proxy.url_through(&url).unwrap())
            .await
            .unwrap();
        instances.push(Arc::new(provider) as Arc<dyn LockProvider>);
        proxies.push((holder, vec![proxy]));
    }
    let reader = RedisLockProvider::builder()
        .key_prefix(&prefix)
        .connect(&url)
        .await
        .unwrap();
    cut_from_the_store(instances, proxies, &reader).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_redlock_a_run_cut_from_the_masters_stops_before_it_is_rerun() {
    let Some(urls) = redlock_urls() else { return };
    let prefix = unique_key_prefix("live-cut-redlock");
    let (mut instances, mut proxies): (_, Proxies) = (Vec::new(), Vec::new());
    for holder in ["instance-a", "instance-b"] {
        let mut through = Vec::new();
        let mut of_holder = Vec::new();
        for url in &urls {
            let proxy = Arc::new(CutProxy::start(&upstream_of(url).unwrap()).await.unwrap());
            through.push(proxy.url_through(url).unwrap());
            of_holder.push(proxy);
        }
        let provider = RedLockProvider::builder()
            .key_prefix(&prefix)
            .holder(holder)
            .connect(&through)
            .await
            .unwrap();
        instances.push(Arc::new(provider) as Arc<dyn LockProvider>);
        proxies.push((holder, of_holder));
    }
    let reader = RedLockProvider::builder()
        .key_prefix(&prefix)
        .connect(&urls)
        .await
        .unwrap();
    cut_from_the_store(instances, proxies, &reader).await;
}
