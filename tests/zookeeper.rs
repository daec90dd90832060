//! Three schedulers on a ZooKeeper ensemble, through the facade: a locked cron job runs each
//! tick once across them, and a leader-only job (`#[scheduled(…, leader = "…")]`) runs on the
//! elected instance only, moving to another when that one shuts down. The scheduler's
//! elections run on `ZkElector` (ephemeral sequential nodes) by one builder line.
//! Needs `SHEDLOCK_TEST_ZK_URL`; skipped without it, failed without it when `CI=true`.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use shedlock::{
    ElectionConfig, JobRegistry, LockContext, Scheduler, SchedulerConfig, scheduled,
    scheduler_lock, zookeeper::ZkLockProvider,
};
use shedlock_test_support::{unique_zk_root, zk_url};

/// What one instance's jobs report: (instance, job, tick or token, when).
#[derive(Debug, Clone)]
struct Instance {
    id: usize,
    log: Arc<Mutex<Vec<Entry>>>,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    instance: usize,
    leader_only: bool,
    token: u64,
    at: Instant,
}

#[scheduled(cron = "* * * * * *")]
#[scheduler_lock(
    name = "zk_every_second",
    lock_at_most_for = "10s",
    lock_at_least_for = "500ms"
)]
async fn every_second(state: Instance, lock: LockContext) {
    state.log.lock().unwrap().push(Entry {
        instance: state.id,
        leader_only: false,
        token: lock.fencing_token(),
        at: Instant::now(),
    });
}

#[scheduled(fixed_rate = "100ms", leader = "zk_batch")]
async fn master_work(state: Instance) {
    state.log.lock().unwrap().push(Entry {
        instance: state.id,
        leader_only: true,
        token: 0,
        at: Instant::now(),
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedulers_on_zookeeper_run_locked_ticks_once_and_master_work_on_the_leader_only() {
    let Some(url) = zk_url() else {
        return;
    };
    let root = unique_zk_root("facade");
    let log: Arc<Mutex<Vec<Entry>>> = Arc::default();
    let config = SchedulerConfig {
        leader_election: ElectionConfig {
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(500),
        },
        shutdown_grace_period: Duration::from_secs(2),
        ..SchedulerConfig::default()
    };
    let mut schedulers = Vec::new();
    let started = Instant::now();
    for id in 0..3 {
        let provider = ZkLockProvider::builder(url.as_str())
            .root(&root)
            .holder(format!("instance-{id}"))
            .connect()
            .await
            .unwrap();
        provider.create_schema().await.unwrap();
        let elector = provider.elector();
        let state = Instance {
            id,
            log: Arc::clone(&log),
        };
        let registry = JobRegistry::new(state)
            .add(shedlock::job!(every_second))
            .add(shedlock::job!(master_work));
        let scheduler = Scheduler::builder()
            .provider(provider)
            .elector(elector) // the one line that puts elections on ZooKeeper
            .config(config.clone())
            .registry(registry)
            .start()
            .await
            .unwrap();
        schedulers.push(scheduler);
    }
    tokio::time::sleep(Duration::from_secs(4)).await;
    let leader = {
        let entries = log.lock().unwrap();
        let master: Vec<usize> = entries
            .iter()
            .filter(|e| e.leader_only)
            .map(|e| e.instance)
            .collect();
        assert!(master.len() >= 10, "the leader-only job ran: {master:?}");
        assert!(
            master.iter().all(|&i| i == master[0]),
            "master work ran on one instance only: {master:?}"
        );
        master[0]
    };
    schedulers[leader].shutdown().await;
    let handed_over_at = Instant::now();
    tokio::time::sleep(Duration::from_secs(2)).await;
    for (id, scheduler) in schedulers.iter().enumerate() {
        if id != leader {
            scheduler.shutdown().await;
        }
    }
    let seconds = started.elapsed().as_secs_f64();

    let entries = log.lock().unwrap().clone();
    let after: Vec<&Entry> = entries
        .iter()
        .filter(|e| e.leader_only && e.at > handed_over_at)
        .collect();
    assert!(
        !after.is_empty(),
        "another instance took over the master work"
    );
    let successor = after[0].instance;
    assert_ne!(successor, leader);
    assert!(
        after.iter().all(|e| e.instance == successor),
        "master work after the handover ran on one instance only"
    );
    // The locked job: tokens strictly increase in run order, one run per tick.
    let mut locked: Vec<&Entry> = entries.iter().filter(|e| !e.leader_only).collect();
    locked.sort_by_key(|e| e.at);
    assert!(locked.len() >= 4, "the locked job ran: {}", locked.len());
    assert!(
        locked.windows(2).all(|w| w[0].token < w[1].token),
        "one run per acquisition, tokens increasing"
    );
    // One tick a second: more runs than seconds would mean a tick ran twice.
    assert!(
        locked.len() as f64 <= seconds + 1.0,
        "{} runs in {seconds:.1} s: {locked:?}",
        locked.len()
    );
}
