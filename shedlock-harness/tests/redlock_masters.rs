//! RedLock's masters fail while three worker processes contend for two locks: one master
//! killed (the other two go on), two killed (acquisitions fail cleanly, nothing runs twice, and
//! work resumes once they are back), a master restarted empty at once. The masters are private
//! `redis-server` processes of the test; the journal is on `SHEDLOCK_TEST_REDIS_URL` (skipped
//! without it, failed on CI).

mod common;

use std::ops::Range;
use std::time::Duration;

use shedlock_harness::{Backend, Event, database_url, now_us, redlock_url};
use shedlock_test_support::RedisServer;

use common::{PATIENCE, Scenario, assert_passed};

const LOCKS: &[&str] = &["alpha", "beta"];

/// Three private masters and a run on them with three workers; `None` when skipped.
async fn contending() -> Option<(Vec<RedisServer>, Scenario)> {
    let journal = database_url(Backend::Redis)?;
    let masters: Vec<RedisServer> = (0..3)
        .map(|_| RedisServer::start(&[]))
        .collect::<Option<_>>()?;
    let urls: Vec<String> = masters.iter().map(RedisServer::url).collect();
    let mut s = Scenario::on(Backend::RedLock, &redlock_url(&journal, &urls.join(","))).await;
    for _ in 0..3 {
        s.spawn(LOCKS, |_| {}).await;
    }
    for lock in LOCKS {
        s.committed_after(lock, 0, PATIENCE).await;
    }
    Some((masters, s))
}

/// The highest token committed so far for `lock`.
fn last_token(s: &Scenario, lock: &str) -> u64 {
    s.fleet
        .events()
        .iter()
        .filter_map(|r| match &r.event {
            Event::Write { lock: l, token, .. } if l == lock => Some(*token),
            _ => None,
        })
        .max()
        .unwrap_or(0)
}

/// One master fails while the workers contend: `fault` acts on the masters and returns when
/// the fault began and ended (its ticks are excused). Every lock goes on, two runs more after its
/// next one, and no tick runs twice.
async fn the_other_masters_go_on(fault: impl FnOnce(&mut [RedisServer]) -> Range<i64>) {
    let Some((mut masters, mut s)) = contending().await else {
        return;
    };
    let fault = fault(&mut masters);
    s.excuse_around(fault.start, fault.end);
    for lock in LOCKS {
        let token = last_token(&s, lock);
        let (_, after, _) = s.committed_after(lock, token, PATIENCE).await;
        s.committed_after(lock, after + 2, PATIENCE).await;
    }
    let report = s.finish().await;
    assert_passed(&report);
    assert_eq!(report.duplicate_ticks, 0);
    drop(masters);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_master_killed_the_other_two_go_on() {
    the_other_masters_go_on(|masters| {
        let killed_at = now_us();
        masters[0].kill();
        killed_at..killed_at
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_masters_killed_fail_cleanly_then_recover() {
    let Some((mut masters, mut s)) = contending().await else {
        return;
    };
    let killed_at = now_us();
    masters[0].kill();
    masters[1].kill();
    let since = s.fleet.events().len();
    s.wait(since, PATIENCE, "a store error without a majority", |r| {
        matches!(&r.event, Event::AcquireFailed { error, .. } if error.contains("2 of 3 Redis masters failed"))
            .then_some(())
    })
    .await;
    // Runs in flight finish; none may start until the masters are back.
    s.fleet.collect_for(Duration::from_secs(4)).await;
    let quiet_from = killed_at + 1_000_000;
    let started: Vec<_> = s.fleet.events()[since..]
        .iter()
        .filter(|r| matches!(r.event, Event::Start { at, .. } if at > quiet_from))
        .collect();
    assert!(started.is_empty(), "ran without a majority: {started:?}");
    // Restarted after the longest lease (3 s): the published mitigation.
    masters[0].restart();
    masters[1].restart();
    let back_at = now_us();
    s.excuse_around(killed_at, back_at);
    for lock in LOCKS {
        let token = last_token(&s, lock);
        s.committed_after(lock, token, PATIENCE).await;
    }
    let report = s.finish().await;
    assert_passed(&report);
    assert!(report.excused_ticks >= 4, "{report}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn master_restarted_empty_at_once() {
    the_other_masters_go_on(|masters| {
        let restarted_at = now_us();
        masters[2].restart();
        restarted_at..now_us()
    })
    .await;
}
