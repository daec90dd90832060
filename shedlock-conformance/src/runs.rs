//! The run-record contract ([`RunLog`]) every store of this workspace offers: what a store's
//! tests add to [`Harness`] ([`RunsHarness`]) and call with [`runs_tests!`](crate::runs_tests).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use super::{Harness, hold, unique_lock_name};
use shedlock_core::{RUN_TRIM_SLACK, RunEnd, RunLog, RunOutcome, RunQuery, RunRecord, RunStart};

/// A [`Harness`] whose store also keeps run records.
#[async_trait]
pub trait RunsHarness: Harness {
    /// The run log of the store the harness's providers use.
    async fn run_log(&self) -> Arc<dyn RunLog>;

    /// The run log of a new provider on the same store whose builder was given
    /// `run_retention(retention)` and `runs_per_lock(runs_per_lock)`.
    async fn run_log_keeping(&self, retention: Duration, runs_per_lock: u32) -> Arc<dyn RunLog>;
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
        &RunEnd::with_error(
            RunOutcome::Failed,
            "x".repeat(10 * shedlock_core::MAX_ERROR_LEN),
        ),
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
        Some(shedlock_core::MAX_ERROR_LEN)
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

/// Pages follow each other without gaps or repeats, newest first, for one lock and across
/// locks: each page is what the store read (its limit pushed down), the next page starts
/// `before` the last record of the one before.
pub async fn runs_page_newest_first_without_gaps<H: RunsHarness>(h: &H) {
    let log = h.run_log().await;
    let (one, other) = (
        unique_lock_name("runs-page-a"),
        unique_lock_name("runs-page-b"),
    );
    let first = log
        .run_started(&RunStart::new(&one, "job", None, "a", 1))
        .await
        .expect("start");
    for token in 2..=23 {
        let lock = if token % 3 == 0 { &other } else { &one };
        let start = RunStart::new(lock, "job", None, "a", token);
        log.run_started(&start).await.expect("start");
        if token % 2 == 0 {
            log.run_finished(&start, &RunEnd::succeeded())
                .await
                .expect("end");
        }
        if token % 5 == 0 {
            h.pass_time(Duration::from_millis(3)).await;
        }
    }
    let page_through = |query: RunQuery| {
        let log = Arc::clone(&log);
        async move {
            let mut seen = Vec::new();
            let mut query = query.limit(4);
            for _ in 0..1000 {
                let page = log.runs(&query).await.expect("a page");
                assert!(page.len() <= 4, "the limit is kept: {page:?}");
                let Some(last) = page.last() else { break };
                query = query.before(last.cursor());
                seen.extend(page);
            }
            seen
        }
    };
    let tokens = |records: &[RunRecord], lock: &str| {
        records
            .iter()
            .filter(|r| r.lock == lock)
            .map(|r| r.fencing_token)
            .collect::<Vec<_>>()
    };
    let expected = |lock: &str| {
        (1..=23)
            .rev()
            .filter(|token| (token % 3 == 0) == (lock == other))
            .collect::<Vec<u64>>()
    };
    let paged = page_through(RunQuery::lock(&one)).await;
    assert_eq!(tokens(&paged, &one), expected(&one), "one lock, paged");
    assert_eq!(paged.len(), expected(&one).len(), "only that lock");
    let across = page_through(RunQuery::all().since(first.started_at)).await;
    assert!(
        across.windows(2).all(|w| w[0].cursor() > w[1].cursor()),
        "newest first without repeats: {across:?}"
    );
    assert_eq!(tokens(&across, &one), expected(&one), "across locks, one");
    assert_eq!(
        tokens(&across, &other),
        expected(&other),
        "across locks, other"
    );
}

/// `runs_per_lock` holds for every lock whatever the order in which locks end (within
/// [`RUN_TRIM_SLACK`] between trims), and the newest records are the ones kept.
pub async fn history_stays_bounded_for_every_lock<H: RunsHarness>(h: &H) {
    const KEEP: u32 = 5;
    const RUNS: u64 = 48;
    let log = h
        .run_log_keeping(shedlock_core::DEFAULT_RUN_RETENTION, KEEP)
        .await;
    let locks = [
        unique_lock_name("runs-bound-a"),
        unique_lock_name("runs-bound-b"),
        unique_lock_name("runs-bound-c"),
    ];
    // a and b end alternately, c once for every four of theirs.
    for token in 1..=RUNS {
        for (i, lock) in locks.iter().enumerate() {
            if i == 2 && token % 4 != 0 {
                continue;
            }
            let start = RunStart::new(lock, "job", None, "a", token);
            log.run_started(&start).await.expect("start");
            let end = if token % 7 == 0 {
                RunEnd::with_error(RunOutcome::Failed, "e".repeat(shedlock_core::MAX_ERROR_LEN))
            } else {
                RunEnd::succeeded()
            };
            log.run_finished(&start, &end).await.expect("end");
        }
    }
    for (i, lock) in locks.iter().enumerate() {
        let kept = runs_of(&log, lock).await;
        assert!(
            kept.len() <= (KEEP + RUN_TRIM_SLACK) as usize,
            "lock {i} keeps {} records, more than {KEEP} + {RUN_TRIM_SLACK}",
            kept.len()
        );
        let newest: Vec<u64> = kept
            .iter()
            .take(KEEP as usize)
            .map(|r| r.fencing_token)
            .collect();
        let last = if i == 2 { RUNS / 4 * 4 } else { RUNS };
        let step = if i == 2 { 4 } else { 1 };
        let expected: Vec<u64> = (0..u64::from(KEEP)).map(|k| last - k * step).collect();
        assert_eq!(newest, expected, "lock {i} keeps its newest");
    }
}

/// A record older than `run_retention` is deleted even when its lock never runs again, once
/// the provider has recorded [`RUN_TRIM_SLACK`] more ends of other locks; a younger record of
/// the same lock stays (age is a record's, not its lock's: a store whose keys merely expire
/// a retention after the lock's last write keeps the old record here).
pub async fn old_records_go_when_other_locks_end<H: RunsHarness>(h: &H) {
    let retention = Duration::from_secs(4);
    let log = h.run_log_keeping(retention, 1000).await;
    let (idle, busy) = (
        unique_lock_name("runs-age-idle"),
        unique_lock_name("runs-age-busy"),
    );
    let end = |token: u64| {
        let log = Arc::clone(&log);
        let start = RunStart::new(&idle, "job", None, "a", token);
        async move {
            log.run_started(&start).await.expect("start");
            log.run_finished(&start, &RunEnd::succeeded())
                .await
                .expect("end");
        }
    };
    end(1).await;
    h.pass_time(Duration::from_millis(2500)).await;
    end(2).await;
    assert_eq!(runs_of(&log, &idle).await.len(), 2);
    h.pass_time(Duration::from_millis(2000)).await;
    for token in 1..=u64::from(RUN_TRIM_SLACK) {
        let start = RunStart::new(&busy, "job", None, "a", token);
        log.run_started(&start).await.expect("start");
        log.run_finished(&start, &RunEnd::succeeded())
            .await
            .expect("end");
    }
    let kept: Vec<u64> = runs_of(&log, &idle)
        .await
        .iter()
        .map(|r| r.fencing_token)
        .collect();
    assert_eq!(
        kept,
        [2],
        "the record past the retention goes, the younger one stays"
    );
}

/// A run's heartbeat: `run_started` with a lease records until when the run goes on (store
/// clock), `run_alive` moves it on while the record runs and refuses (false, nothing written)
/// once it ended or for a run never recorded; the end clears it.
pub async fn a_run_heartbeat_is_kept_while_it_runs<H: RunsHarness>(h: &H) {
    let log = h.run_log().await;
    let lock = unique_lock_name("runs-alive");
    let lease = Duration::from_secs(30);
    let start = RunStart::new(&lock, "job", Some(tick()), "a", 3).alive_for(lease);
    let running = log.run_started(&start).await.expect("start");
    let until = running.alive_until.expect("a heartbeat deadline");
    assert!(
        until + ROUNDING >= running.started_at + lease,
        "{until:?} is not a lease after the start {:?}",
        running.started_at
    );
    assert_eq!(runs_of(&log, &lock).await, std::slice::from_ref(&running));
    h.pass_time(Duration::from_millis(20)).await;
    assert!(
        log.run_alive(&start, lease).await.expect("renew"),
        "a running record is renewed"
    );
    let [renewed] = &runs_of(&log, &lock).await[..] else {
        panic!("one record expected");
    };
    assert!(renewed.alive_until.expect("renewed") > until, "{renewed:?}");
    assert_eq!(renewed.outcome, RunOutcome::Running);
    assert_eq!(renewed.finished_at, None);

    let never = RunStart::new(&lock, "job", None, "a", 4);
    assert!(!log.run_alive(&never, lease).await.expect("missing"));
    assert_eq!(runs_of(&log, &lock).await.len(), 1, "nothing written");

    log.run_finished(
        &start,
        &RunEnd::with_error(RunOutcome::Interrupted, "taken over"),
    )
    .await
    .expect("end");
    assert!(
        !log.run_alive(&start, lease).await.expect("ended"),
        "an ended record tells its runner to stop"
    );
    let [ended] = &runs_of(&log, &lock).await[..] else {
        panic!("one record expected");
    };
    assert_eq!(
        (ended.outcome, ended.alive_until),
        (RunOutcome::Interrupted, None)
    );
    assert!(ended.finished_at.is_some());
    let plain = RunStart::new(&lock, "job", None, "a", 5);
    let without = log.run_started(&plain).await.expect("start");
    assert_eq!(without.alive_until, None, "no lease, no heartbeat");

    let short = Duration::from_millis(200);
    let lapsing = RunStart::new(&lock, "job", None, "a", 6).alive_for(short);
    let lapsed = log.run_started(&lapsing).await.expect("start");
    h.pass_time(short + Duration::from_millis(300)).await;
    assert!(
        !log.run_alive(&lapsing, lease).await.expect("passed"),
        "a heartbeat that passed is not renewed"
    );
    let kept = runs_of(&log, &lock).await;
    let still = kept.iter().find(|r| r.fencing_token == 6).expect("kept");
    assert_eq!(still.alive_until, lapsed.alive_until, "left as it was");
}

/// Generates one `#[tokio::test]` per run-record case for a [`RunsHarness`]; a harness
/// expression evaluating to `None` skips, as for [`conformance_tests!`](crate::conformance_tests).
#[macro_export]
macro_rules! runs_tests {
    ($harness:expr) => {
        $crate::__conformance_cases!(($harness) $crate::runs:
            a_run_reads_back_as_recorded,
            the_first_end_stays,
            attempts_and_errors_read_back,
            runs_are_selected_by_lock_and_time,
            runs_page_newest_first_without_gaps,
            history_stays_bounded_for_every_lock,
            old_records_go_when_other_locks_end,
            a_run_heartbeat_is_kept_while_it_runs,
        );
    };
}
