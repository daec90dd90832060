//! A rerun never overlaps a live run (issue 29 item 3) on etcd, in real time: two instances
//! of a job that asks for reruns of interrupted ticks, with run heartbeats on etcd leases.
//!
//! - A run that goes on past `lock_at_most_for` loses its lock but keeps its heartbeat key:
//!   the other instance waits for it and never runs the tick beside it; the record says the
//!   run succeeded.
//! - A run whose instance loses the cluster for longer than its run lease stops at its own
//!   deadline, before etcd ends its heartbeat's lease; only then does the other instance run
//!   the tick again; the records say the first was interrupted and the second succeeded.
//!
//! Needs `SHEDLOCK_TEST_ETCD_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use shedlock_core::{
    Job, JobLock, JobRegistry, LockContext, LockProvider, OnInterrupted, RunContext, RunOutcome,
    RunQuery, RunRecord, Schedule, Scheduler, SchedulerConfig,
};
use shedlock_etcd::EtcdLockProvider;
use shedlock_test_support::{CutProxy, ProxyMode, unique_key_prefix, upstream_of, url_at};
use tokio::sync::mpsc;

/// The run heartbeat: renewed every third of it; etcd keeps the heartbeat key at least 2 s
/// (its minimum TTL) after each renewal.
const RUN_LEASE: Duration = Duration::from_secs(1);

fn since_epoch() -> Duration {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap()
}

/// One run as the job saw it; the end is taken when the run's future completes or is dropped.
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

/// A job every 10 seconds under a lock of `lock_at_most_for` 2 s (etcd's shortest lease) that
/// reruns interrupted ticks; its first run takes `first` (calling `on_first` with its holder
/// first), later runs 200 ms.
fn job(
    spans: &Spans,
    ended: &mpsc::UnboundedSender<usize>,
    first: Duration,
    on_first: Arc<dyn Fn(&str) + Send + Sync>,
) -> Job<()> {
    let (spans, ended) = (spans.clone(), ended.clone());
    Job::new(
        "live_run",
        Schedule::cron("*/10 * * * * *").unwrap(),
        move |()| {
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
        },
    )
    .with_lock(
        JobLock::new("live_run")
            .unwrap()
            .lock_at_most_for(Duration::from_secs(2))
            .unwrap()
            .on_interrupted(OnInterrupted::Rerun),
    )
}

async fn start(provider: &EtcdLockProvider, job: &Job<()>) -> Scheduler {
    Scheduler::builder()
        .shared_provider(Arc::new(provider.clone()) as Arc<dyn LockProvider>)
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

/// The tick's records, oldest first.
async fn records_of(provider: &EtcdLockProvider, tick: Option<SystemTime>) -> Vec<RunRecord> {
    use shedlock_core::RunLog;
    let mut records = provider
        .runs(&RunQuery::lock("live_run"))
        .await
        .expect("read the runs");
    records.retain(|r| r.tick == tick);
    records.reverse();
    records
}

/// Instances `holder` on the test cluster under `prefix`, each through `endpoints`.
async fn instance(endpoints: &str, prefix: &str, holder: &str) -> EtcdLockProvider {
    EtcdLockProvider::builder(endpoints)
        .prefix(prefix)
        .holder(holder)
        .request_timeout(Duration::from_secs(2))
        .connect()
        .await
        .expect("connect")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_past_lock_at_most_for_is_not_rerun_beside_itself() {
    let Some(url) = common::etcd_url() else {
        return;
    };
    let prefix = unique_key_prefix("rerun-live");
    let a = instance(&url, &prefix, "instance-a").await;
    let b = instance(&url, &prefix, "instance-b").await;
    let (spans, (tx, mut rx)) = (Spans::default(), mpsc::unbounded_channel());
    let job = job(&spans, &tx, Duration::from_secs(6), Arc::new(|_: &str| {}));
    let (one, two) = (start(&a, &job).await, start(&b, &job).await);
    ended(&mut rx, 1, &spans).await;
    one.shutdown().await;
    two.shutdown().await;

    let spans = spans.get();
    let first = &spans[0];
    let of_tick: Vec<&Span> = spans.iter().filter(|s| s.tick == first.tick).collect();
    assert_eq!(
        of_tick.len(),
        1,
        "the tick ran again beside its live run (lock gone after 2 s, run 6 s): {spans:#?}"
    );
    let records = records_of(&a, first.tick).await;
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
async fn a_run_cut_from_its_cluster_stops_before_it_is_rerun() {
    let Some(url) = common::etcd_url() else {
        return;
    };
    let member = url
        .split(',')
        .next()
        .expect("an endpoint")
        .trim()
        .to_owned();
    let upstream = upstream_of(&member).expect("a member's address");
    let prefix = unique_key_prefix("rerun-cut");
    let mut proxies = std::collections::HashMap::new();
    let mut instances = Vec::new();
    for holder in ["instance-a", "instance-b"] {
        let proxy = Arc::new(CutProxy::start(&upstream).await.unwrap());
        let through = url_at(&member, proxy.addr()).unwrap();
        instances.push(instance(&through, &prefix, holder).await);
        proxies.insert(holder.to_owned(), proxy);
    }
    let proxies = Arc::new(proxies);
    // The first run's instance loses the cluster for 4 s (four run leases, past etcd's 2 s
    // minimum for the heartbeat's lease): its requests hang.
    let cut: Arc<dyn Fn(&str) + Send + Sync> = {
        let proxies = Arc::clone(&proxies);
        Arc::new(move |holder: &str| {
            let proxy = Arc::clone(&proxies[holder]);
            proxy.set(ProxyMode::Blackhole);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(4)).await;
                proxy.set(ProxyMode::Open);
            });
        })
    };
    let (spans, (tx, mut rx)) = (Spans::default(), mpsc::unbounded_channel());
    let job = job(&spans, &tx, Duration::from_secs(30), cut);
    let mut schedulers = Vec::new();
    for instance in &instances {
        schedulers.push(start(instance, &job).await);
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
    let records = records_of(&instances[1], first.tick).await;
    assert_eq!(
        records
            .iter()
            .map(|r| (r.attempt, r.outcome))
            .collect::<Vec<_>>(),
        [(1, RunOutcome::Interrupted), (2, RunOutcome::Succeeded)],
        "{records:#?}"
    );
}
