//! Run records on the test cluster, counted in etcd itself: leases, keys per section, and the
//! heartbeat's lease. Needs `SHEDLOCK_TEST_ETCD_URL`; skipped without it, failed without it
//! when `CI=true`.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shedlock_conformance::longevity;
use shedlock_conformance::{ServerHarness, unique_key_prefix, unique_lock_name};
use shedlock_core::{LockProvider, RUN_TRIM_SLACK, RunEnd, RunLog, RunOutcome, RunQuery, RunStart};
use shedlock_test_support::etcd_url;

use crate::EtcdLockProvider;
use crate::record::{from_ms, now_ms};
use crate::wire;

async fn provider(base: &str, per_lock: u32) -> Option<EtcdLockProvider> {
    let provider = EtcdLockProvider::builder(etcd_url()?)
        .prefix(unique_key_prefix(base))
        .holder("tester")
        .runs_per_lock(per_lock)
        .connect()
        .await
        .expect("connect to SHEDLOCK_TEST_ETCD_URL");
    Some(provider)
}

/// Keys under `section` of the provider's prefix, and the distinct leases they are on.
async fn keys_in(provider: &EtcdLockProvider, section: &str) -> (usize, HashSet<i64>) {
    let response = provider
        .client
        .range(wire::RangeRequest::prefix(
            &provider.keys.section(section),
            true,
        ))
        .await
        .expect("range");
    let leases = response.kvs.iter().map(|kv| kv.lease).collect();
    (response.kvs.len(), leases)
}

async fn live_leases(provider: &EtcdLockProvider) -> HashSet<i64> {
    provider
        .client
        .leases()
        .await
        .expect("LeaseLeases")
        .into_iter()
        .collect()
}

/// Item 2 of issue 29: every record had a lease of its own, and trimming deleted the key
/// without revoking it (320 live leases for 165 records). Now the records of a time bucket
/// share one lease: after 450 runs the cluster has a handful more live leases, not 450; the
/// index has exactly one entry per record kept; no heartbeat key outlives its run.
#[tokio::test]
async fn live_leases_stay_constant_as_records_grow() {
    const PER_LOCK: u32 = 5;
    const RUNS: u64 = 150;
    let Some(provider) = provider("runs-leases", PER_LOCK).await else {
        return;
    };
    let before = live_leases(&provider).await;
    let locks = [
        unique_lock_name("leases-a"),
        unique_lock_name("leases-b/x"),
        unique_lock_name("leases-c%"),
    ];
    for token in 1..=RUNS {
        for lock in &locks {
            let start =
                RunStart::new(lock, "job", None, "a", token).alive_for(Duration::from_secs(60));
            provider.run_started(&start).await.expect("start");
            let end = if token % 3 == 0 {
                RunEnd::with_error(RunOutcome::Failed, "boom")
            } else {
                RunEnd::succeeded()
            };
            provider.run_finished(&start, &end).await.expect("end");
        }
    }
    let after = live_leases(&provider).await;
    let new: Vec<_> = after.difference(&before).collect();
    // One bucket lease (two across a bucket's end), and room for other tests' leases.
    assert!(
        new.len() <= 40,
        "{} runs left {} new live leases",
        RUNS * 3,
        new.len()
    );
    let (records, record_leases) = keys_in(&provider, "run").await;
    let (entries, _) = keys_in(&provider, "run-time").await;
    let (heartbeats, _) = keys_in(&provider, "run-alive").await;
    let (buckets, _) = keys_in(&provider, "run-leases").await;
    let bound = 3 * (PER_LOCK + RUN_TRIM_SLACK) as usize;
    assert!(records <= bound, "{records} records kept, bound {bound}");
    assert_eq!(entries, records, "one index entry per record");
    assert_eq!(heartbeats, 0, "heartbeats end with their runs");
    assert!(record_leases.len() <= 2, "records on {record_leases:?}");
    assert!((1..=2).contains(&buckets), "{buckets} bucket keys");
    for lock in &locks {
        let kept = provider.runs(&RunQuery::lock(lock)).await.expect("read");
        assert!(kept.len() <= (PER_LOCK + RUN_TRIM_SLACK) as usize);
        assert_eq!(kept[0].fencing_token, RUNS, "{lock} keeps its newest");
    }
}

/// A run's heartbeat is its etcd lease: it reads as alive while etcd holds the lease, even
/// once the deadline its runner wrote has passed (etcd rounds leases up to whole seconds and
/// its minimum TTL), and as passed once etcd ended it; its runner, seeing its own deadline
/// passed, ends the lease so that every instance sees what it saw.
#[tokio::test]
async fn a_heartbeat_lives_as_long_as_its_etcd_lease() {
    let Some(provider) = provider("runs-heartbeat", 1000).await else {
        return;
    };
    let lock = unique_lock_name("heartbeat");
    let read = |provider: EtcdLockProvider, lock: String| async move {
        let records = provider.runs(&RunQuery::lock(&lock)).await.expect("read");
        (records, from_ms(now_ms()))
    };

    // A runner that dies: nobody renews; the record is alive until etcd ends the lease.
    let died = RunStart::new(&lock, "job", None, "a", 1).alive_for(Duration::from_millis(100));
    let written = provider.run_started(&died).await.expect("start");
    let deadline = written.alive_until.expect("a deadline");
    let (records, at) = read(provider.clone(), lock.clone()).await;
    assert!(records[0].is_alive(at), "{records:?}");
    let waited = Instant::now();
    loop {
        let (records, at) = read(provider.clone(), lock.clone()).await;
        if !records[0].is_alive(at) {
            assert!(at > deadline, "passed before its deadline");
            assert!(records[0].is_interrupted(0, false, at));
            break;
        }
        assert!(
            waited.elapsed() < Duration::from_secs(10),
            "the heartbeat's lease never ended"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !provider
            .run_alive(&died, Duration::from_secs(30))
            .await
            .expect("renew"),
        "a heartbeat etcd ended is not renewed"
    );

    // A runner whose own deadline passed while etcd's lease still runs: it ends the lease.
    let late = RunStart::new(&lock, "job", None, "a", 2).alive_for(Duration::from_millis(100));
    provider.run_started(&late).await.expect("start");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (records, at) = read(provider.clone(), lock.clone()).await;
    let record = records.iter().find(|r| r.fencing_token == 2).unwrap();
    assert!(
        record.is_alive(at),
        "etcd's lease (2 s at least) still runs"
    );
    assert!(
        !provider
            .run_alive(&late, Duration::from_secs(30))
            .await
            .expect("renew"),
    );
    let (records, at) = read(provider.clone(), lock.clone()).await;
    let record = records.iter().find(|r| r.fencing_token == 2).unwrap();
    assert!(
        !record.is_alive(at),
        "passed for every instance: {record:?}"
    );
    let (heartbeats, _) = keys_in(&provider, "run-alive").await;
    assert_eq!(heartbeats, 0);
}

/// A month of a fleet's history (`shedlock_conformance::longevity`) written through the
/// provider, then what etcd keeps, counted in etcd: records within `runs_per_lock` + slack per
/// lock, one index entry per record, no heartbeat left, one or two bucket keys, and the
/// records on one or two leases (the bucket's), whatever the number of runs written.
async fn history_of(days: u32) {
    let Some(provider) = provider("runs-month", 1000).await else {
        return;
    };
    let holders = provider.clone();
    let keeping = provider.clone();
    let harness = ServerHarness::new(move |holder| {
        Arc::new(holders.with_holder(holder).expect("valid holder")) as Arc<dyn LockProvider>
    })
    .with_inspector(provider.clone())
    .with_run_log(provider.clone())
    .with_run_log_keeping(move |retention, per_lock| {
        Arc::new(
            keeping
                .with_run_retention(retention, per_lock)
                .expect("settings"),
        ) as Arc<dyn RunLog>
    });
    let figures = longevity::month_of_history(&harness, days).await;
    println!("etcd: {figures}");
    let (records, record_leases) = keys_in(&provider, "run").await;
    let (entries, entry_leases) = keys_in(&provider, "run-time").await;
    let (heartbeats, _) = keys_in(&provider, "run-alive").await;
    let (buckets, _) = keys_in(&provider, "run-leases").await;
    println!(
        "etcd: {records} record keys, {entries} index keys, {heartbeats} heartbeat keys, \
         {buckets} bucket keys; the records on {} lease(s)",
        record_leases.len()
    );
    // The fleet's records and the longevity run's marker.
    assert!(
        records <= figures.kept + 1,
        "{records} records, {} kept",
        figures.kept
    );
    assert!(records <= (longevity::LOCKS + 1) * figures.bound_per_lock);
    assert_eq!(entries, records, "one index entry per record");
    assert_eq!(heartbeats, 0);
    assert!((1..=2).contains(&buckets), "{buckets} bucket keys");
    assert!(record_leases.len() <= 2 && entry_leases == record_leases);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_day_of_history_stays_within_the_settings() {
    history_of(1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_month_of_history_stays_within_the_settings() {
    history_of(30).await;
}

/// A run that still runs is never deleted under its runner: trimming a lock past
/// `runs_per_lock` skips it (the next oldest goes), and its heartbeat moves its record to the
/// current bucket's lease, so the sweep of its start's bucket leaves it. Without either,
/// `run_alive` finds no record and the scheduler stops a job that still runs.
#[tokio::test]
async fn a_live_run_outlives_trimming_and_its_starts_bucket() {
    let Some(provider) = provider("runs-live", 1000).await else {
        return;
    };
    let provider = provider
        .with_run_retention(Duration::from_secs(2), 5)
        .expect("settings");
    let lock = unique_lock_name("live");
    let beat = Duration::from_secs(30);
    let long = RunStart::new(&lock, "job", None, "a", 1).alive_for(beat);
    provider.run_started(&long).await.expect("start");
    let passing = Instant::now();
    let mut token = 1;
    // Past the retention (2 s; buckets of 1 s), with a heartbeat every 300 ms and other runs
    // of the same lock ending in between: trims and sweeps.
    while passing.elapsed() < Duration::from_secs(4) {
        for _ in 0..4 {
            token += 1;
            let start = RunStart::new(&lock, "job", None, "a", token);
            provider.run_started(&start).await.expect("start");
            provider
                .run_finished(&start, &RunEnd::succeeded())
                .await
                .expect("end");
        }
        assert!(
            provider.run_alive(&long, beat).await.expect("renew"),
            "the long run's record went after {:?} and {token} runs",
            passing.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    let kept = provider.runs(&RunQuery::lock(&lock)).await.expect("read");
    assert!(
        kept.len() <= (5 + RUN_TRIM_SLACK + 1) as usize,
        "{} records",
        kept.len()
    );
    let running = kept.iter().find(|r| r.fencing_token == 1).expect("kept");
    assert_eq!(running.outcome, RunOutcome::Running);
}

/// Written for longer than the retention (3 s: buckets of 1 s), the records of a busy lock and
/// of one that stopped stay within the retention, and live on the few bucket leases that
/// cover it: the leases in use depend on the retention, not on the runs written.
#[tokio::test]
async fn leases_and_records_follow_the_retention_as_time_passes() {
    let Some(provider) = provider("runs-age", 1000).await else {
        return;
    };
    let retention = Duration::from_secs(3);
    let provider = provider
        .with_run_retention(retention, 1000)
        .expect("settings");
    let (busy, stopped) = (
        unique_lock_name("age-busy"),
        unique_lock_name("age-stopped"),
    );
    let run = |lock: String, token: u64| {
        let provider = provider.clone();
        async move {
            let start = RunStart::new(&lock, "job", None, "a", token);
            provider.run_started(&start).await.expect("start");
            provider
                .run_finished(&start, &RunEnd::succeeded())
                .await
                .expect("end");
        }
    };
    run(stopped.clone(), 1).await;
    let writing = Instant::now();
    let mut token = 0;
    let mut most_buckets = 0;
    while writing.elapsed() < retention * 2 + Duration::from_secs(1) {
        token += 1;
        run(busy.clone(), token).await;
        if token % 20 == 0 {
            let (buckets, _) = keys_in(&provider, "run-leases").await;
            most_buckets = most_buckets.max(buckets);
        }
    }
    let now = from_ms(now_ms());
    let (_, record_leases) = keys_in(&provider, "run").await;
    let (buckets, _) = keys_in(&provider, "run-leases").await;
    // Buckets of the last 3 s, the current one, and one a write may not have swept yet.
    assert!(most_buckets <= 5, "{most_buckets} buckets at once");
    assert!(
        buckets <= 5 && record_leases.len() <= 5,
        "{buckets} buckets"
    );
    assert_eq!(
        provider
            .runs(&RunQuery::lock(&stopped))
            .await
            .expect("read"),
        [],
        "a lock that stopped keeps records past the retention"
    );
    let kept = provider.runs(&RunQuery::lock(&busy)).await.expect("read");
    let oldest = kept.last().expect("recent records").started_at;
    assert!(
        oldest + retention + Duration::from_millis(500) >= now,
        "a record of {:?} ago kept ({token} runs written)",
        now.duration_since(oldest).unwrap_or_default()
    );
    assert!(kept.len() < token as usize, "nothing went");
}
