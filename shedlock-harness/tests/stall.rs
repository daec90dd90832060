//! A paused process (SIGSTOP) that resumes (SIGCONT) long after its leases ended, while the
//! others go on: the failure of a per-second cron job with `lock_at_least_for = 500ms`, a
//! leader-only job and three instances, reported on PostgreSQL and MariaDB, in which the
//! resumed instance re-ran a tick it had missed (0.6 s after another instance had run it, once
//! its lock_at_least_for had passed; its late run then held the lock into the next second,
//! which was skipped everywhere) and, as a deposed leader, ran its leader-only job once more
//! while the new leader ran it.
//!
//! Asserted here, on SQLite, PostgreSQL, MariaDB, Redis, RedLock and etcd: no tick twice, every tick
//! exactly once with no tick excused by the pause (the paused worker held no lease), every tick
//! the paused worker passed over reported by its scheduler as missed, no leader work in a
//! superseded term.

mod common;

use std::time::Duration;

use shedlock::ElectionConfig;
use shedlock_harness::{Backend, Event, LeaderWork, Signal, WorkerOptions, WriteOutcome, now_us};

use common::{PATIENCE, Scenario, assert_passed};

/// The reported set-up: election lease 3 s, renew deadline 2 s, retry 500 ms.
const TIMING: ElectionConfig = ElectionConfig {
    lease_duration: Duration::from_secs(3),
    renew_deadline: Duration::from_secs(2),
    retry_period: Duration::from_millis(500),
};

/// Longer than the election lease and its renew deadline, and than `lock_at_least_for`.
const PAUSE: Duration = Duration::from_millis(4_450);

fn service(options: &mut WorkerOptions) {
    options.job = Duration::from_millis(100);
    options.lease = Duration::from_secs(3);
    options.at_least = Duration::from_millis(500);
    options.leader_work = Some(LeaderWork {
        every: Duration::from_millis(200),
        timing: TIMING,
    });
}

async fn paused_leader_resumes_after_its_leases(backend: Backend) {
    let Some(mut s) = Scenario::start(backend, 3, &["tick"], service).await else {
        return;
    };
    let leader = s
        .wait(0, PATIENCE, "a leader", |r| match r.event {
            Event::Leader { .. } => Some(r.worker),
            _ => None,
        })
        .await;
    s.committed_after("tick", 0, PATIENCE).await;
    // Stopped after a tick's run, at a quarter of the second, so that it resumes at 0.7 of a
    // second: after the 500 ms lock_at_least_for of the tick another worker ran meanwhile.
    let since = s.fleet.events().len();
    s.wait(since, PATIENCE, "a tick's write", |r| match &r.event {
        Event::Write { lock, .. } if lock == "tick" => Some(()),
        _ => None,
    })
    .await;
    s.sleep_until_phase(0.25).await;
    let stopped_at = s.stop_between_statements(leader).await;
    tokio::time::sleep(PAUSE).await;
    let resumed_from = s.fleet.events().len();
    s.inject(leader, Signal::Cont);
    let resumed_at = now_us();

    let new_leader = s
        .wait(0, PATIENCE, "another leader", |r| match r.event {
            Event::Leader { at, .. } if r.worker != leader && at > stopped_at => Some(r.worker),
            _ => None,
        })
        .await;
    s.wait(
        resumed_from,
        PATIENCE,
        "the paused worker's missed ticks",
        |r| {
            matches!(&r.event, Event::Missed { lock, .. } if r.worker == leader && lock == "tick")
                .then_some(())
        },
    )
    .await;
    // Three more ticks after the resumption.
    let mut committed = 0;
    s.wait(
        resumed_from,
        PATIENCE,
        "three ticks after the resumption",
        |r| {
            if let Event::Write {
                lock,
                start,
                outcome: WriteOutcome::Accepted,
                ..
            } = &r.event
                && lock == "tick"
                && *start > resumed_at
            {
                committed += 1;
            }
            (committed == 3).then_some(())
        },
    )
    .await;
    let events = s.fleet.events();
    let elected_at = events.iter().find_map(|r| match r.event {
        Event::Leader { at, .. } if r.worker == new_leader && at > stopped_at => Some(at),
        _ => None,
    });
    let deposed_at = events.iter().find_map(|r| match r.event {
        Event::Follower { at } if r.worker == leader && at > stopped_at => Some(at),
        _ => None,
    });
    let late_attempt = events[resumed_from..].iter().find_map(|r| match &r.event {
        Event::Skipped { at, .. } if r.worker == leader => {
            Some(format!("skipped at +{} ms", (at - resumed_at) / 1000))
        }
        Event::Acquired { at, .. } if r.worker == leader => {
            Some(format!("ran at +{} ms", (at - resumed_at) / 1000))
        }
        _ => None,
    });
    let ms = |at: Option<i64>, from: i64| {
        at.map_or("never".into(), |at| format!("{} ms", (at - from) / 1000))
    };
    println!(
        "{backend}: paused {} ms; another worker elected {} after the stop; the resumed one \
         deposed {} after resuming, its first tick {}",
        (resumed_at - stopped_at) / 1000,
        ms(elected_at, stopped_at),
        ms(deposed_at, resumed_at),
        late_attempt.unwrap_or_else(|| "not attempted".into()),
    );
    let report = s.finish().await;
    assert_passed(&report);
    assert_eq!(report.excused_ticks, 0, "no tick may be excused:\n{report}");
    let paused_for = (resumed_at - stopped_at) / 1_000_000;
    assert!(
        report.reported_missed >= paused_for as u64 - 1,
        "the paused worker reports the ticks it passed over ({paused_for} s paused):\n{report}"
    );
    assert!(
        report.leader_work > 0 && report.stale_leader_work == 0,
        "{report}"
    );
    assert_ne!(new_leader, leader);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_paused_leader_resumes_after_its_leases() {
    paused_leader_resumes_after_its_leases(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_paused_leader_resumes_after_its_leases() {
    paused_leader_resumes_after_its_leases(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_paused_leader_resumes_after_its_leases() {
    paused_leader_resumes_after_its_leases(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_paused_leader_resumes_after_its_leases() {
    paused_leader_resumes_after_its_leases(Backend::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_paused_leader_resumes_after_its_leases() {
    paused_leader_resumes_after_its_leases(Backend::RedLock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_paused_leader_resumes_after_its_leases() {
    paused_leader_resumes_after_its_leases(Backend::Etcd).await;
}
