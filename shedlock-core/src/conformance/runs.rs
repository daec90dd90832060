//! The run-record contract ([`RunLog`]) every store of this workspace offers: what a store's
//! tests add to [`Harness`] ([`RunsHarness`]) and call with [`runs_tests!`](crate::runs_tests).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use super::{Harness, hold, unique_lock_name};
use crate::{RunEnd, RunLog, RunOutcome, RunQuery, RunRecord, RunStart};

/// A [`Harness`] whose store also keeps run records.
#[async_trait]
pub trait RunsHarness: Harness {
    /// The run log of the store the harness's providers use.
    async fn run_log(&self) -> Arc<dyn RunLog>;
}

/// Store times are rounded (milliseconds on most stores).
const ROUNDING: Duration = Duration::from_millis(1);

/// A tick time with whole milliseconds, as every store keeps it.
fn tick() -> SystemTime {
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .expect("after 1970");
    SystemTime::UNIX_EPOCH + Duration::from_millis(now.as_millis() as u64)
}

async fn runs_of(log: &Arc<dyn RunLog>, lock: &str) -> Vec<RunRecord> {
    log.runs(&RunQuery::lock(lock)).await.expect("read runs")
}

/// A run is recorded running when it starts (store clock, within its lease), and reads back
/// finished, with its end time, once it ends; recording its start again changes nothing.
pub async fn a_run_reads_back_as_recorded<H: RunsHarness>(h: &H) {
    let (a, log) = (h.provider("a").await, h.run_log().await);
    let lock = unique_lock_name("runs-basic");
    let lease = hold(&a, &lock).await;
    let fire = tick();
    let start = RunStart::new(
        &lock,
        "report",
        Some(fire),
        a.holder(),
        lease.fencing_token(),
    );
    let running = log.run_started(&start).await.expect("run_started");
    assert_eq!(running.outcome, RunOutcome::Running);
    assert_eq!(
        (
            running.lock.as_str(),
            running.job.as_str(),
            running.holder.as_str()
        ),
        (lock.as_str(), "report", a.holder())
    );
    assert_eq!(
        (running.tick, running.fencing_token, running.attempt),
        (Some(fire), lease.fencing_token(), 1)
    );
    assert!(
        running.started_at + ROUNDING >= lease.locked_at(),
        "started {:?} before its lease {:?}",
        running.started_at,
        lease.locked_at()
    );
    assert_eq!(runs_of(&log, &lock).await, std::slice::from_ref(&running));
    assert_eq!(log.run_started(&start).await.expect("again"), running);

    log.run_finished(&start, &RunEnd::succeeded())
        .await
        .expect("run_finished");
    let [done] = &runs_of(&log, &lock).await[..] else {
        panic!("one record expected");
    };
    assert_eq!(done.outcome, RunOutcome::Succeeded);
    assert_eq!(done.error, None);
    assert_eq!(done.started_at, running.started_at);
    let finished = done.finished_at.expect("an end time");
    assert!(finished + ROUNDING >= done.started_at);
    assert!(a.release(&lease).await.expect("release"));
}

/// The first end recorded stays: a run marked interrupted by the instance that noticed is not
/// turned into a success by its stalled holder's late write. An end without a recorded start
/// is recorded whole.
pub async fn the_first_end_stays<H: RunsHarness>(h: &H) {
    let log = h.run_log().await;
    let lock = unique_lock_name("runs-first-end");
    let start = RunStart::new(&lock, "import", Some(tick()), "stalled", 41);
    log.run_started(&start).await.expect("run_started");
    let interrupted = RunEnd::with_error(RunOutcome::Interrupted, "lease expired");
    log.run_finished(&start, &interrupted)
        .await
        .expect("interrupted");
    log.run_finished(&start, &RunEnd::succeeded())
        .await
        .expect("late success");
    let records = runs_of(&log, &lock).await;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].outcome, RunOutcome::Interrupted);
    assert_eq!(records[0].error.as_deref(), Some("lease expired"));

    let never_started = RunStart::new(&lock, "import", None, "other", 42);
    log.run_finished(
        &never_started,
        &RunEnd::with_error(RunOutcome::Failed, "boom"),
    )
    .await
    .expect("end without start");
    let records = runs_of(&log, &lock).await;
    assert_eq!(records.len(), 2, "{records:?}");
    let whole = records
        .iter()
        .find(|r| r.fencing_token == 42)
        .expect("recorded");
    assert_eq!(
        (whole.outcome, whole.tick, whole.holder.as_str()),
        (RunOutcome::Failed, None, "other")
    );
    assert!(whole.finished_at.is_some());
}

/// Attempts are records of their own, newest first; error texts come back as written (quotes,
/// markup, line breaks, any script), cut to the documented length.
pub async fn attempts_and_errors_read_back<H: RunsHarness>(h: &H) {
    let log = h.run_log().await;
    let lock = unique_lock_name("runs-attempts");
    let error = "connection reset: \"db\" <script>alert(1)</script>\n\tat line 2 — ünïcödé ✓";
    let first = RunStart::new(&lock, "sync", Some(tick()), "a", 7);
    log.run_started(&first).await.expect("start 1");
    log.run_finished(&first, &RunEnd::with_error(RunOutcome::Retried, error))
        .await
        .expect("end 1");
    let second = first.clone().attempt(2);
    log.run_started(&second).await.expect("start 2");
    log.run_finished(&second, &RunEnd::succeeded())
        .await
        .expect("end 2");
    let long = RunStart::new(&lock, "sync", None, "a", 8);
    log.run_finished(
        &long,
        &RunEnd::with_error(RunOutcome::Failed, "x".repeat(10 * crate::MAX_ERROR_LEN)),
    )
    .await
    .expect("long error");

    let records = runs_of(&log, &lock).await;
    let keys: Vec<(u64, u32, RunOutcome)> = records
        .iter()
        .map(|r| (r.fencing_token, r.attempt, r.outcome))
        .collect();
    assert!(
        keys.contains(&(7, 1, RunOutcome::Retried))
            && keys.contains(&(7, 2, RunOutcome::Succeeded)),
        "{keys:?}"
    );
    let retried = records
        .iter()
        .find(|r| r.fencing_token == 7 && r.attempt == 1)
        .expect("attempt 1");
    assert_eq!(retried.error.as_deref(), Some(error));
    let cut = records.iter().find(|r| r.fencing_token == 8).expect("long");
    assert_eq!(
        cut.error.as_ref().map(String::len),
        Some(crate::MAX_ERROR_LEN)
    );
    let newest_first = records
        .windows(2)
        .all(|pair| pair[0].started_at >= pair[1].started_at);
    assert!(newest_first, "not newest first: {records:?}");
}

/// Queries select by lock and start time and keep the newest up to their limit.
pub async fn runs_are_selected_by_lock_and_time<H: RunsHarness>(h: &H) {
    let log = h.run_log().await;
    let (one, other) = (
        unique_lock_name("runs-query-a"),
        unique_lock_name("runs-query-b"),
    );
    for token in 1..=3 {
        let start = RunStart::new(&one, "job", None, "a", token);
        log.run_started(&start).await.expect("start");
        h.pass_time(Duration::from_millis(5)).await;
    }
    log.run_started(&RunStart::new(&other, "job", None, "a", 1))
        .await
        .expect("start");
    let all = runs_of(&log, &one).await;
    assert_eq!(
        all.iter().map(|r| r.fencing_token).collect::<Vec<_>>(),
        [3, 2, 1]
    );
    let latest = log
        .runs(&RunQuery::lock(&one).limit(2))
        .await
        .expect("limit");
    assert_eq!(
        latest.iter().map(|r| r.fencing_token).collect::<Vec<_>>(),
        [3, 2]
    );
    let since = log
        .runs(&RunQuery::lock(&one).since(all[1].started_at))
        .await
        .expect("since");
    assert!(since.iter().all(|r| r.started_at >= all[1].started_at));
    assert!(since.iter().any(|r| r.fencing_token == 3));
    let everything = log.runs(&RunQuery::all()).await.expect("all");
    assert!(everything.iter().any(|r| r.lock == other));
}

/// Generates one `#[tokio::test]` per run-record case for a [`RunsHarness`]; a harness
/// expression evaluating to `None` skips, as for [`conformance_tests!`](crate::conformance_tests).
#[macro_export]
macro_rules! runs_tests {
    ($harness:expr) => {
        $crate::__conformance_cases!(($harness) $crate::conformance::runs:
            a_run_reads_back_as_recorded,
            the_first_end_stays,
            attempts_and_errors_read_back,
            runs_are_selected_by_lock_and_time,
        );
    };
}
