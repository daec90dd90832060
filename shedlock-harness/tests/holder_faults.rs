//! A lock holder killed (SIGKILL) or paused past its lease (SIGSTOP) in the middle of a job,
//! with three worker processes on each database. PostgreSQL and MariaDB need
//! `SHEDLOCK_TEST_PG_URL` / `SHEDLOCK_TEST_MYSQL_URL`, Redis `SHEDLOCK_TEST_REDIS_URL`, RedLock
//! both that (the journal) and `SHEDLOCK_TEST_REDLOCK_URLS`, etcd (the pause only; its killed
//! holder is in `etcd_faults.rs`) that journal and `SHEDLOCK_TEST_ETCD_URL` (skipped without,
//! failed on CI).

mod common;

use shedlock_harness::{Backend, Event, Signal, WriteOutcome, now_us};

use common::{PATIENCE, Scenario, assert_passed};

/// Leases of 2.5 s, so that they end between two ticks.
fn lease_between_ticks(options: &mut shedlock_harness::WorkerOptions) {
    options.lease = std::time::Duration::from_millis(2_500);
}

/// 2.5 s leases, 1 s ticks: a killed holder's lock is free 2.5 s after it was taken, and the
/// next run starts at the first tick after that (within one tick, plus scheduling slack).
async fn holder_killed_mid_job(backend: Backend) {
    let Some(mut s) =
        Scenario::start(backend, 3, &["victim", "bystander"], lease_between_ticks).await
    else {
        return;
    };
    let (killed, token, _) = s.fault_mid_job("victim", Signal::Kill).await;
    let until = s.lease_until(killed, "victim", token);

    let (next, next_token, next_start) = s.committed_after("victim", token, PATIENCE).await;
    assert_ne!(next, killed);
    assert!(
        next_token > token,
        "the next holder's token {next_token} is not above the killed holder's {token}"
    );
    let late_ms = (next_start - until) / 1000;
    assert!(
        late_ms >= 0,
        "the lock was taken {} ms before the killed holder's lease ended",
        -late_ms
    );
    assert!(
        late_ms <= 1_000 + 500,
        "the next run started {late_ms} ms after the lease ended, more than one tick"
    );
    // Both locks keep running afterwards.
    s.committed_after("victim", next_token, PATIENCE).await;
    let report = s.finish().await;
    assert_passed(&report);
    assert_eq!(report.killed, 1);
    assert!(
        report.excused_ticks >= 1,
        "the dead lease's ticks were skipped:\n{report}"
    );
}

/// A holder frozen past its lease: another worker takes over and commits; when the frozen one
/// resumes, its lost-lock signal fires and its fenced write is rejected.
///
/// One lock only, so that the worker is frozen while its job sleeps and not in the middle of a
/// statement for another lock: on SQLite a process frozen mid-statement holds the database's
/// single write lock, and every other process then waits for it to resume (docs/RELIABILITY.md).
async fn holder_paused_beyond_its_lease(backend: Backend) {
    let Some(mut s) = Scenario::start(backend, 3, &["victim"], lease_between_ticks).await else {
        return;
    };
    let (paused, token, paused_at) = s.fault_mid_job("victim", Signal::Stop).await;
    let (next, _, _) = s.committed_after("victim", token, PATIENCE).await;
    assert_ne!(next, paused);

    let (resumed_from, lost, outcome) = s.resume_until_write(paused, "victim", token).await;
    assert!(lost, "the job's LockContext did not report the lease lost");
    assert_eq!(
        outcome,
        WriteOutcome::Rejected,
        "the stale write was not rejected"
    );
    assert!(
        s.fleet.events()[resumed_from..].iter().any(|r| r.worker == paused
            && matches!(&r.event, Event::Lost { lock, token: t, .. } if lock == "victim" && *t == token)),
        "no lost-lock event for the paused lease"
    );
    s.excuse_around(paused_at, now_us());
    s.committed_after("victim", token + 2, PATIENCE).await;
    let report = s.finish().await;
    assert_passed(&report);
    assert!(
        report.stale_attempted >= 1 && report.stale_accepted == 0,
        "{report}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_holder_killed_mid_job() {
    holder_killed_mid_job(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_holder_killed_mid_job() {
    holder_killed_mid_job(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_holder_killed_mid_job() {
    holder_killed_mid_job(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_holder_paused_beyond_its_lease() {
    holder_paused_beyond_its_lease(Backend::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_holder_paused_beyond_its_lease() {
    holder_paused_beyond_its_lease(Backend::Postgres).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_holder_paused_beyond_its_lease() {
    holder_paused_beyond_its_lease(Backend::MySql).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_holder_killed_mid_job() {
    holder_killed_mid_job(Backend::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_holder_killed_mid_job() {
    holder_killed_mid_job(Backend::RedLock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_holder_paused_beyond_its_lease() {
    holder_paused_beyond_its_lease(Backend::Redis).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_holder_paused_beyond_its_lease() {
    holder_paused_beyond_its_lease(Backend::RedLock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etcd_holder_paused_beyond_its_lease() {
    holder_paused_beyond_its_lease(Backend::Etcd).await;
}
