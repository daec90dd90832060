//! Run records as nodes under `<root>/runs`: the run-record conformance cases (without and
//! with credentials), a stalled holder's late end, what is kept (counted in ZooKeeper itself),
//! pages that read only their own nodes, heartbeats, ACLs, and a record corrupted by hand.
//! Needs `SHEDLOCK_TEST_ZK_URL`; skipped without it, failed without it when `CI=true`.

mod common;

use std::time::Duration;

use shedlock_conformance::history::{
    assert_runs_error, end_runs, late_end_of_a_stalled_holder, run_tokens,
};
use shedlock_conformance::unique_lock_name;
use shedlock_conformance::{CutProxy, ProxyMode};
use shedlock_core::{
    Error, LockProvider, RUN_TRIM_SLACK, RunCursor, RunEnd, RunLog, RunOutcome, RunQuery, RunStart,
};
use shedlock_zookeeper::ZkLockProvider;

use common::{RunsOn, run_nodes};

shedlock_conformance::runs_tests!(async {
    Some(RunsOn::new(common::provider("runs").await?, false))
});

/// The cases on a provider with digest credentials, whose nodes are closed to other clients.
mod authenticated {
    use super::*;

    shedlock_conformance::runs_tests!(async {
        Some(RunsOn::new(
            common::authenticated_provider("runs-auth").await?,
            true,
        ))
    });
}

/// A provider on a root of its own keeping `per_lock` runs per lock for `retention`.
async fn keeping(per_lock: u32, retention: Duration) -> Option<ZkLockProvider> {
    let harness = RunsOn::new(common::provider("runs-kept").await?, false);
    Some(harness.keeping(retention, per_lock).await)
}

/// A holder that stalled past its lease ends its run after another instance took the lock
/// and marked it interrupted: the interruption stays.
#[tokio::test]
async fn a_late_end_does_not_overwrite_the_first() {
    let Some(stalled) = common::provider("runs-late").await else {
        return;
    };
    let other = stalled.with_holder("other").unwrap();
    late_end_of_a_stalled_holder(&stalled, &other).await;
}

/// Issue 29, item 2: two locks ending alternately with `runs_per_lock(5)` each keep at most
/// 5 + RUN_TRIM_SLACK nodes in ZooKeeper, their newest (lock `a` kept 160 of 160 when every
/// 32nd end of the provider trimmed only the lock that happened to end then). Two providers
/// write, as two instances would.
#[tokio::test]
async fn every_lock_keeps_its_bound_whatever_the_order_of_ends() {
    let Some(one) = keeping(5, Duration::from_secs(3600)).await else {
        return;
    };
    let other = one.with_holder("other").unwrap();
    let client = common::raw_client().await;
    let (a, b) = (
        unique_lock_name("runs-alt-a"),
        unique_lock_name("runs-alt-b"),
    );
    for token in 1..=160 {
        for (lock, log) in [(&a, &one), (&b, &other)] {
            let start = RunStart::new(lock, "job", None, "h", token);
            log.run_started(&start).await.unwrap();
            log.run_finished(&start, &RunEnd::succeeded())
                .await
                .unwrap();
        }
    }
    for lock in [&a, &b] {
        let (nodes, _) = run_nodes(&client, one.root(), lock).await;
        assert!(
            (5..=5 + RUN_TRIM_SLACK as usize).contains(&nodes),
            "{lock} keeps {nodes} run nodes"
        );
        let newest = run_tokens(&one, lock).await;
        assert_eq!(newest[..5], [160, 159, 158, 157, 156], "{lock}");
    }
}

/// Runs that only end (their starts failed) are bounded the same way.
#[tokio::test]
async fn ends_without_starts_are_bounded_too() {
    let Some(provider) = keeping(3, Duration::from_secs(3600)).await else {
        return;
    };
    let lock = unique_lock_name("runs-kept");
    end_runs(&provider, &lock, 1..=64).await;
    let tokens = run_tokens(&provider, &lock).await;
    assert!(tokens.len() <= 3 + RUN_TRIM_SLACK as usize, "{tokens:?}");
    assert_eq!(tokens[..3], [64, 63, 62]);
}

/// Issue 29, item 2 (age): a lock that never runs again loses its runs past the retention,
/// and its directory, within RUN_TRIM_SLACK ends of other locks on the same provider; a lock
/// still in use keeps its young runs.
#[tokio::test]
async fn an_idle_lock_loses_its_old_runs_and_its_directory() {
    let retention = Duration::from_millis(400);
    let Some(provider) = keeping(1000, retention).await else {
        return;
    };
    let client = common::raw_client().await;
    let (idle, busy) = (unique_lock_name("runs-idle"), unique_lock_name("runs-busy"));
    end_runs(&provider, &idle, 1..=3).await;
    assert_eq!(run_nodes(&client, provider.root(), &idle).await, (3, true));
    // The ensemble's clock has to pass the retention; nothing to wait on but time.
    tokio::time::sleep(retention * 2).await;
    end_runs(&provider, &busy, 1..=u64::from(RUN_TRIM_SLACK)).await;
    assert_eq!(
        run_nodes(&client, provider.root(), &idle).await,
        (0, false),
        "the idle lock's runs and directory stay"
    );
    assert!(run_nodes(&client, provider.root(), &busy).await.0 > 0);
    // A new run of the idle lock makes its directory again.
    end_runs(&provider, &idle, 4..=4).await;
    assert_eq!(run_tokens(&provider, &idle).await, [4]);
}

/// A page reads only its own nodes: with the lock's oldest record unreadable, its newest
/// records read back (one lock, `since`, `before`, across locks), and only a read that
/// reaches the old record fails, naming it.
#[tokio::test]
async fn a_page_reads_only_its_own_nodes() {
    let Some(provider) = common::provider("runs-page").await else {
        return;
    };
    let (lock, other) = (
        unique_lock_name("runs-page"),
        unique_lock_name("runs-page-b"),
    );
    let oldest = RunStart::new(&lock, "job", None, "a", 1);
    let since = provider.run_started(&oldest).await.unwrap().started_at;
    end_runs(&provider, &lock, 2..=40).await;
    end_runs(&provider, &other, 1..=10).await;
    let path = format!(
        "{}/runs/{lock}/00000000000000000001-0000000001",
        provider.root()
    );
    let client = common::raw_client().await;
    client.set_data(&path, b"{not json", None).await.unwrap();

    let tokens = |records: Vec<shedlock_core::RunRecord>| {
        records.iter().map(|r| r.fencing_token).collect::<Vec<_>>()
    };
    let page = provider
        .runs(&RunQuery::lock(&lock).limit(5))
        .await
        .unwrap();
    assert_eq!(tokens(page.clone()), [40, 39, 38, 37, 36]);
    let since_page = provider
        .runs(&RunQuery::lock(&lock).since(since).limit(5))
        .await
        .unwrap();
    assert_eq!(tokens(since_page), [40, 39, 38, 37, 36], "since");
    let next = provider
        .runs(&RunQuery::lock(&lock).before(page[4].cursor()).limit(5))
        .await
        .unwrap();
    assert_eq!(tokens(next), [35, 34, 33, 32, 31], "before");
    let across = provider
        .runs(&RunQuery::all().since(since).limit(12))
        .await
        .unwrap();
    assert_eq!(across.len(), 12);
    assert!(across.windows(2).all(|w| w[0].cursor() > w[1].cursor()));
    let deep = provider
        .runs(&RunQuery::all().before(across[11].cursor()).limit(5))
        .await
        .unwrap();
    assert_eq!(deep.len(), 5, "{deep:?}");
    assert!(deep.iter().all(|r| r.cursor() < across[11].cursor()));
    assert_runs_error(provider.runs(&RunQuery::lock(&lock)).await, &lock, &[&path]);
}

/// Any cursor, not only a record's own (the dashboard asks for "just after" a run to find it,
/// a URL can hold any time): a page `before` it is what the whole history filtered by it
/// reads, in one lock and across locks.
#[tokio::test]
async fn pages_before_any_cursor_match_the_whole_history() {
    let Some(provider) = common::provider("runs-cursors").await else {
        return;
    };
    let (lock, other) = (
        unique_lock_name("runs-cur-a"),
        unique_lock_name("runs-cur-b"),
    );
    for token in 1..=12 {
        let (lock, attempts) = if token % 3 == 0 {
            (&other, 1)
        } else {
            (&lock, 1 + token % 2)
        };
        for attempt in 1..=u32::try_from(attempts).unwrap() {
            let start = RunStart::new(lock, "job", None, "a", token).attempt(attempt);
            provider
                .run_finished(&start, &RunEnd::succeeded())
                .await
                .unwrap();
        }
        if token % 4 == 0 {
            tokio::time::sleep(Duration::from_millis(3)).await;
        }
    }
    let all = provider.runs(&RunQuery::all()).await.unwrap();
    let ms = Duration::from_millis(1);
    for record in &all {
        let at = record.cursor();
        let cursors = [
            at.clone(),
            RunCursor::new(at.started_at, at.fencing_token, at.attempt + 1, &*at.lock),
            RunCursor::new(at.started_at + ms, at.fencing_token, at.attempt, &*at.lock),
            RunCursor::new(at.started_at - ms, at.fencing_token, at.attempt, &*at.lock),
            RunCursor::new(at.started_at, 0, 0, &*at.lock),
        ];
        for cursor in cursors {
            for query in [RunQuery::lock(&record.lock), RunQuery::all()] {
                let query = query.before(cursor.clone()).limit(3);
                let page = provider.runs(&query).await.unwrap();
                assert_eq!(page, query.apply(all.clone()), "{query:?}");
            }
        }
    }
}

/// Issue 29, item 3 on ZooKeeper: a heartbeat renews the run node (its version moves on), and
/// the run's own end still ends it, once; a heartbeat never revives an ended run.
#[tokio::test]
async fn an_end_after_heartbeats_ends_the_run_once() {
    let Some(provider) = common::provider("runs-beat").await else {
        return;
    };
    let lease = Duration::from_secs(30);
    let lock = unique_lock_name("runs-beat");
    let start = RunStart::new(&lock, "job", None, "a", 5).alive_for(lease);
    let running = provider.run_started(&start).await.unwrap();
    for _ in 0..3 {
        assert!(provider.run_alive(&start, lease).await.unwrap());
    }
    let [renewed] = &provider.runs(&RunQuery::lock(&lock)).await.unwrap()[..] else {
        panic!("one record");
    };
    assert!(renewed.alive_until > running.alive_until, "{renewed:?}");
    provider
        .run_finished(&start, &RunEnd::with_error(RunOutcome::Failed, "boom"))
        .await
        .unwrap();
    provider
        .run_finished(&start, &RunEnd::succeeded())
        .await
        .unwrap();
    assert!(!provider.run_alive(&start, lease).await.unwrap());
    let [ended] = &provider.runs(&RunQuery::lock(&lock)).await.unwrap()[..] else {
        panic!("one record");
    };
    assert_eq!(
        (ended.outcome, ended.error.as_deref(), ended.alive_until),
        (RunOutcome::Failed, Some("boom"), None)
    );
}

/// A renewal that reaches the ensemble after the heartbeat it read passed (its answers held
/// by the network for longer than the lease) puts the heartbeat back as it was and says the
/// run is not alive: an instance that saw the heartbeat pass decides on the record as it saw
/// it.
#[tokio::test]
async fn a_renewal_landing_after_the_heartbeat_passed_is_put_back() {
    let Some(direct) = common::provider("runs-late-beat").await else {
        return;
    };
    let upstream = common::zk_url().unwrap();
    let upstream = upstream.split(',').next().unwrap().to_owned();
    let proxy = CutProxy::start(&upstream).await.unwrap();
    let slow = ZkLockProvider::builder(proxy.addr().to_string())
        .root(direct.root())
        .holder("tester")
        .connect()
        .await
        .unwrap();
    let lease = Duration::from_millis(600);
    let lock = unique_lock_name("runs-late-beat");
    let start = RunStart::new(&lock, "job", None, "a", 9).alive_for(lease);
    let started = slow.run_started(&start).await.unwrap();
    // The renewal's read (ensemble time and the node) is answered while the heartbeat holds;
    // the answers reach the provider only after it passed, so its write lands after it too.
    proxy.set(ProxyMode::HoldAnswers);
    let renewal = tokio::spawn({
        let slow = slow.clone();
        let start = start.clone();
        async move { slow.run_alive(&start, Duration::from_secs(30)).await }
    });
    tokio::time::sleep(lease * 2).await;
    proxy.set(ProxyMode::Open);
    assert!(!renewal.await.unwrap().unwrap(), "renewed after it passed");
    let [record] = &direct.runs(&RunQuery::lock(&lock)).await.unwrap()[..] else {
        panic!("one record");
    };
    assert_eq!(record.outcome, RunOutcome::Running);
    assert_eq!(
        record.alive_until, started.alive_until,
        "put back as it was"
    );
}

/// Run nodes are closed to other clients when the provider has credentials.
#[tokio::test]
async fn run_nodes_get_the_lock_nodes_acl() {
    let Some(provider) = common::authenticated_provider("runs-acl").await else {
        return;
    };
    let lock = unique_lock_name("runs-acl");
    let start = RunStart::new(&lock, "job", None, "a", 1);
    provider
        .run_log()
        .unwrap()
        .run_started(&start)
        .await
        .unwrap();
    let owner = common::client_as(common::DIGEST_USER, common::DIGEST_PASSWORD).await;
    let anonymous = common::raw_client().await;
    let runs = format!("{}/runs", provider.root());
    let lock_dir = format!("{runs}/{lock}");
    let run = format!("{lock_dir}/00000000000000000001-0000000001");
    for path in [&runs, &lock_dir, &run] {
        common::assert_digest_only(&owner, path).await;
        assert_eq!(
            anonymous.get_data(path).await.map(drop),
            Err(zookeeper_client::Error::NoAuth),
            "{path} is readable without credentials"
        );
    }
}

/// A run node edited by hand into something shedlock never writes: a read fails with a store
/// error naming the node, and nothing panics.
#[tokio::test]
async fn a_corrupt_record_is_a_store_error() {
    let Some(provider) = common::provider("runs-corrupt").await else {
        return;
    };
    let log = provider.run_log().unwrap();
    let lock = unique_lock_name("runs-corrupt");
    let start = RunStart::new(&lock, "job", None, "a", 7);
    log.run_started(&start).await.unwrap();
    let path = format!(
        "{}/runs/{lock}/00000000000000000007-0000000001",
        provider.root()
    );
    let client = common::raw_client().await;
    client.set_data(&path, b"{not json", None).await.unwrap();
    assert_runs_error(log.runs(&RunQuery::lock(&lock)).await, &lock, &[&path]);
}

#[tokio::test]
async fn bad_run_settings_name_their_field() {
    for (builder, field) in [
        (
            ZkLockProvider::builder("127.0.0.1:1").runs_per_lock(20_001),
            "runs_per_lock",
        ),
        (
            ZkLockProvider::builder("127.0.0.1:1").runs_per_lock(0),
            "runs_per_lock",
        ),
        (
            ZkLockProvider::builder("127.0.0.1:1").run_retention(Duration::ZERO),
            "run_retention",
        ),
    ] {
        match builder.connect().await {
            Err(Error::InvalidConfig { field: got, .. }) => assert_eq!(got, field),
            other => panic!("{field}: expected invalid config, got {other:?}"),
        }
    }
}
