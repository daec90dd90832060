//! Crash recovery with real processes: a holder SIGKILLed inside a run, and the whole fleet
//! killed inside a run, with heartbeat leases (`run_lease`) and `OnInterrupted::Rerun`. The
//! checker counts a tick that ran twice or not at all as a failure, and no tick is excused:
//! the interrupted tick must run again, once, on another process, after the dead lease.
//!
//! Each case prints `recovery: …` with the time from the kill to the rerun's start, the figure
//! in docs/RELIABILITY.md (`scripts/recovery.sh` collects them).

mod common;

use std::time::Duration;

use shedlock_harness::{Backend, Event, Signal, WorkerOptions, WriteOutcome, now_us};

use common::{PATIENCE, Scenario, assert_passed};

/// Heartbeat lease of the runs.
const RUN_LEASE: Duration = Duration::from_secs(3);
/// `lock_at_most_for`: what a killed holder would block the job for without heartbeats.
const AT_MOST: Duration = Duration::from_secs(60);

/// Ticks every 10 s, 2 s jobs, 60 s `lock_at_most_for`, 3 s heartbeat leases, reruns.
fn recovering(options: &mut WorkerOptions) {
    options.tick = Duration::from_secs(10);
    options.job = Duration::from_secs(2);
    options.lease = AT_MOST;
    options.at_least = Duration::from_millis(800);
    options.run_lease = RUN_LEASE;
    options.rerun = true;
}

/// The first accepted write of `lock` above `token_above`: (worker, token, tick, start).
fn accepted_write(s: &Scenario, lock: &str, token_above: u64) -> Option<(usize, u64, i64, i64)> {
    s.fleet.events().iter().find_map(|r| match &r.event {
        Event::Write {
            lock: l,
            token,
            tick,
            start,
            outcome: WriteOutcome::Accepted,
            ..
        } if l == lock && *token > token_above => Some((r.worker, *token, *tick, *start)),
        _ => None,
    })
}

/// The tick a start line belongs to: the worker's latest attempt of the lock before it.
fn tick_of_start(s: &Scenario, worker: usize, lock: &str, token: u64) -> i64 {
    let mut tick = None;
    for r in s.fleet.events() {
        match &r.event {
            Event::Attempt {
                lock: l, tick: t, ..
            } if r.worker == worker && l == lock => tick = Some(*t),
            Event::Start {
                lock: l, token: t, ..
            } if r.worker == worker && l == lock && *t == token => {
                break;
            }
            _ => {}
        }
    }
    tick.expect("the killed worker attempted the tick it started")
}

async fn holder_killed_mid_run_is_rerun(backend: Backend) {
    let Some(mut s) = Scenario::start(backend, 3, &["report"], recovering).await else {
        return;
    };
    let (killed, token, killed_at) = s.fault_mid_job("report", Signal::Kill).await;
    let tick = tick_of_start(&s, killed, "report", token);
    let until = s.lease_until(killed, "report", token);

    s.committed_after("report", token, PATIENCE).await;
    let (rerun_by, rerun_token, rerun_tick, rerun_start) =
        accepted_write(&s, "report", token).expect("the rerun's write");
    assert_ne!(rerun_by, killed);
    assert!(rerun_token > token, "the rerun holds a newer token");
    assert_eq!(
        rerun_tick, tick,
        "the interrupted tick ran again, not only the next one"
    );
    assert!(
        rerun_start >= until,
        "the rerun started {} ms before the killed holder's lease ended",
        (until - rerun_start) / 1000
    );
    println!(
        "recovery: {backend} holder killed mid-run, interrupted tick rerun after {} ms \
         (run_lease {} ms; lock_at_most_for {} ms without heartbeats)",
        (rerun_start - killed_at) / 1000,
        RUN_LEASE.as_millis(),
        AT_MOST.as_millis()
    );
    // The fleet goes on: two more ticks.
    s.committed_after("report", rerun_token + 1, PATIENCE).await;
    let report = s.finish().await;
    assert_passed(&report);
    assert_eq!(
        (
            report.excused_ticks,
            report.missed_ticks,
            report.duplicate_ticks
        ),
        (0, 0, 0),
        "no tick lost or doubled, none excused:\n{report}"
    );
}

/// Every process killed inside a run; a new fleet starts after the lease ran out and before
/// the next tick: it runs the interrupted tick again at start.
async fn whole_fleet_killed_mid_run_is_rerun_at_start(backend: Backend) {
    let Some(mut s) = Scenario::start(backend, 2, &["report"], recovering).await else {
        return;
    };
    let (holder, token, _) = s.start_after_first_commit("report").await;
    let tick = tick_of_start(&s, holder, "report", token);
    for worker in 0..2 {
        s.inject(worker, Signal::Kill);
    }
    let killed_at = now_us();
    for _ in 0..2 {
        s.spawn(&["report"], recovering).await;
    }
    let (_, rerun_token, rerun_tick, rerun_start) = loop {
        s.committed_after("report", token, PATIENCE).await;
        if let Some(write) = accepted_write(&s, "report", token) {
            break write;
        }
    };
    assert!(rerun_token > token);
    assert_eq!(rerun_tick, tick, "the interrupted tick ran again");
    println!(
        "recovery: {backend} whole fleet killed mid-run, tick rerun by the new fleet after {} ms",
        (rerun_start - killed_at) / 1000
    );
    // The checker's ticks start at the first worker's start; the new fleet's ticks follow.
    s.outages.push(killed_at..rerun_start);
    s.committed_after("report", rerun_token, PATIENCE).await;
    let report = s.finish().await;
    assert_passed(&report);
    assert_eq!(
        (report.missed_ticks, report.duplicate_ticks),
        (0, 0),
        "no tick lost or doubled:\n{report}"
    );
}

/// A holder frozen (SIGSTOP) inside a run past its heartbeat lease: another process reruns the
/// tick meanwhile; when the frozen one resumes, its run heartbeat has passed, so its job is
/// stopped before it takes another step: it attempts no write under the old token at all (the
/// fencing guard would refuse one), it reports the lease lost, and its late end cannot undo
/// the takeover. Every tick exactly once.
async fn holder_paused_mid_run_is_rerun_and_fenced(backend: Backend) {
    let Some(mut s) = Scenario::start(backend, 3, &["report"], recovering).await else {
        return;
    };
    let (paused, token, paused_at) = s.fault_mid_job("report", Signal::Stop).await;
    let tick = tick_of_start(&s, paused, "report", token);
    s.committed_after("report", token, PATIENCE).await;
    let (rerun_by, rerun_token, rerun_tick, _) =
        accepted_write(&s, "report", token).expect("the rerun's write");
    assert_ne!(rerun_by, paused);
    assert_eq!(rerun_tick, tick, "the interrupted tick ran again");

    let resumed_from = s.fleet.events().len();
    s.inject(paused, Signal::Cont);
    s.wait(
        resumed_from,
        PATIENCE,
        "the resumed worker's lost lease",
        |r| {
            matches!(&r.event, Event::Lost { lock, token: t, .. }
            if r.worker == paused && lock == "report" && *t == token)
            .then_some(())
        },
    )
    .await;
    s.excuse_around(paused_at, now_us());
    s.committed_after("report", rerun_token, PATIENCE).await;
    let stale_attempts = s
        .fleet
        .events()
        .iter()
        .filter(|r| {
            matches!(&r.event, Event::Write { lock, token: t, .. }
                if r.worker == paused && lock == "report" && *t == token)
        })
        .count();
    let report = s.finish().await;
    assert_eq!(
        stale_attempts, 0,
        "the resumed worker took a step of its stopped run:\n{report}"
    );
    assert_passed(&report);
    assert_eq!(
        (
            report.missed_ticks,
            report.duplicate_ticks,
            report.stale_accepted
        ),
        (0, 0, 0),
        "no tick lost or doubled, no stale write accepted:\n{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_holder_paused_mid_run_is_rerun_and_fenced() {
    holder_paused_mid_run_is_rerun_and_fenced(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_holder_paused_mid_run_is_rerun_and_fenced() {
    holder_paused_mid_run_is_rerun_and_fenced(Backend::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_holder_killed_mid_run_is_rerun() {
    holder_killed_mid_run_is_rerun(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_holder_killed_mid_run_is_rerun() {
    holder_killed_mid_run_is_rerun(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_holder_killed_mid_run_is_rerun() {
    holder_killed_mid_run_is_rerun(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_whole_fleet_killed_mid_run_is_rerun_at_start() {
    whole_fleet_killed_mid_run_is_rerun_at_start(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_whole_fleet_killed_mid_run_is_rerun_at_start() {
    whole_fleet_killed_mid_run_is_rerun_at_start(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_whole_fleet_killed_mid_run_is_rerun_at_start() {
    whole_fleet_killed_mid_run_is_rerun_at_start(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_holder_killed_mid_run_is_rerun() {
    holder_killed_mid_run_is_rerun(Backend::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_holder_killed_mid_run_is_rerun() {
    holder_killed_mid_run_is_rerun(Backend::RedLock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_whole_fleet_killed_mid_run_is_rerun_at_start() {
    whole_fleet_killed_mid_run_is_rerun_at_start(Backend::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_whole_fleet_killed_mid_run_is_rerun_at_start() {
    whole_fleet_killed_mid_run_is_rerun_at_start(Backend::RedLock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_holder_killed_mid_run_is_rerun() {
    holder_killed_mid_run_is_rerun(Backend::Etcd).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_whole_fleet_killed_mid_run_is_rerun_at_start() {
    whole_fleet_killed_mid_run_is_rerun_at_start(Backend::Etcd).await;
}
