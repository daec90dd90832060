//! A rerun never overlaps a live run (issue 29 item 3), on the real databases, in real time:
//! two instances, a job that asks for reruns of interrupted ticks (`OnInterrupted::Rerun`).
//!
//! - A run that goes on past `lock_at_most_for` loses its lock but keeps its run heartbeat:
//!   the instance that skipped the tick waits for it and never runs the tick beside it; its own
//!   success is what the record says.
//! - A run whose instance loses the store for longer than its run lease stops before its
//!   heartbeat can pass in the store; only then does the other instance run the tick again;
//!   the records say the first was interrupted and the second succeeded. (PostgreSQL and
//!   MariaDB, through a proxy that holds the first instance's traffic; SQLite has no network.)

mod common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use common::{Db, Provider, since_epoch};
use shedlock::{
    Job, JobLock, JobRegistry, LockContext, OnInterrupted, RunContext, RunOutcome, RunQuery,
    RunRecord, Schedule, Scheduler, SchedulerConfig,
};
use shedlock_test_support::{CutProxy, ProxyMode, mysql_url, pg_url};
use tokio::sync::mpsc;

const RUN_LEASE: Duration = Duration::from_secs(1);

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

async fn start(provider: &Provider, job: &Job<()>) -> Scheduler {
    Scheduler::builder()
        .shared_provider(provider.shared())
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

async fn records_of(provider: &Provider, tick: Option<SystemTime>) -> Vec<RunRecord> {
    let log = provider.shared();
    let mut records = log
        .run_log()
        .expect("SQL stores keep run records")
        .runs(&RunQuery::lock("live_run"))
        .await
        .unwrap();
    records.retain(|r| r.tick == tick);
    records.reverse();
    records
}

async fn a_run_past_lock_at_most_for_is_not_rerun_beside_itself(db: Db) {
    let Some(a) = common::provider(db, "instance-a").await else {
        return;
    };
    let b = common::another_instance(&a, "instance-b").await;
    let (spans, (tx, mut rx)) = (Spans::default(), mpsc::unbounded_channel());
    let job = job(&spans, &tx, Duration::from_secs(5), Arc::new(|_: &str| {}));
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
        "{db:?}: the tick ran again beside its live run (lock gone after 2 s, run 5 s): {spans:#?}"
    );
    let records = records_of(&a, first.tick).await;
    assert_eq!(
        records
            .iter()
            .map(|r| (r.attempt, r.outcome))
            .collect::<Vec<_>>(),
        [(1, RunOutcome::Succeeded)],
        "{db:?}: the long run's own end is recorded: {records:#?}"
    );
    a.remove_store().await;
}

/// An instance of `of` whose connections go through `proxy`.
async fn through(of: &Provider, db: Db, proxy: &CutProxy, holder: &str) -> Provider {
    let url = match db {
        Db::Postgres => pg_url(),
        Db::MySql => mysql_url(),
        Db::Sqlite => None,
    }
    .expect("a server database");
    let url = proxy.url_through(&url).unwrap();
    common::instance_at(of, &url, holder).await
}

async fn a_run_cut_from_its_store_stops_before_it_is_rerun(db: Db) {
    if db == Db::Sqlite {
        println!("skipped: SQLite has no network to cut (the rule is the same on every store)");
        return;
    }
    let Some(setup) = common::provider(db, "setup").await else {
        return;
    };
    let upstream = match db {
        Db::Postgres => pg_url(),
        _ => mysql_url(),
    }
    .and_then(|url| shedlock_test_support::upstream_of(&url).ok())
    .expect("a server URL");
    let mut proxies = HashMap::new();
    let mut instances = Vec::new();
    for holder in ["instance-a", "instance-b"] {
        let proxy = Arc::new(CutProxy::start(&upstream).await.unwrap());
        instances.push(through(&setup, db, &proxy, holder).await);
        proxies.insert(holder.to_owned(), proxy);
    }
    let proxies = Arc::new(proxies);
    // The first run's instance loses the store for 3 s (three run leases): its statements hang.
    let cut: Arc<dyn Fn(&str) + Send + Sync> = {
        let proxies = Arc::clone(&proxies);
        Arc::new(move |holder: &str| {
            let proxy = Arc::clone(&proxies[holder]);
            proxy.set(ProxyMode::Blackhole);
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(3)).await;
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
        "{db:?}: the second run is the tick's rerun: {spans:#?}"
    );
    assert_ne!(first.holder, rerun.holder, "{db:?}: {spans:#?}");
    let first_end = first.end.expect("the cut run stopped");
    assert!(
        first_end <= rerun.start,
        "{db:?}: the rerun started {:?} before the cut run stopped: {spans:#?}",
        first_end - rerun.start
    );
    assert!(
        first_end < first.start + Duration::from_secs(30),
        "{db:?}: the cut run was stopped at its heartbeat, not at its end: {spans:#?}"
    );
    let records = records_of(&setup, first.tick).await;
    assert_eq!(
        records
            .iter()
            .map(|r| (r.attempt, r.outcome))
            .collect::<Vec<_>>(),
        [(1, RunOutcome::Interrupted), (2, RunOutcome::Succeeded)],
        "{db:?}: {records:#?}"
    );
    setup.remove_store().await;
}

sql_tests!(
    a_run_past_lock_at_most_for_is_not_rerun_beside_itself,
    a_run_cut_from_its_store_stops_before_it_is_rerun,
);
