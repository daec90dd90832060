//! The run table: what each run costs in statements, bounds that hold however runs end (or
//! never do), tables made before the indexes, and a month of a fleet's history.

use std::time::Duration;

use shedlock_conformance::longevity::{LOCKS, RUNS_PER_LOCK, month_of_history};
use shedlock_conformance::unique_lock_name;
use shedlock_core::{RUN_TRIM_SLACK, RunEnd, RunLog, RunOutcome, RunQuery, RunStart};
use shedlock_sqlx::ColumnNames;

use super::{Provider, TestDb, drop_table, fresh, unique_table};
use crate::common::{harness_over, keeping, statements};

/// Rows of `lock` in `provider`'s run table, counted in the database.
async fn rows_of<D: TestDb>(db: &D, provider: &Provider<D>, lock: &str) -> i64 {
    let r = provider.runs_table();
    db.scalar(&format!(
        "SELECT COUNT(*) FROM {r} WHERE lock_name = '{lock}'"
    ))
    .await
}

/// A run costs the statements `RUN_STATEMENTS` says (start, heartbeat, end), and keeping a
/// lock within `runs_per_lock` adds at most one statement per [`RUN_TRIM_SLACK`] / 2 runs.
pub(crate) async fn run_statements_per_run<D: TestDb>(db: &D) {
    statements::record();
    let provider = fresh(db, "runner").await;
    let r = provider.runs_table().to_owned();
    let mut before = statements::executed_on(&r);
    let mut cost = || {
        let now = statements::executed_on(&r);
        std::mem::replace(&mut before, now).abs_diff(now)
    };
    let lease = Duration::from_secs(30);
    let start = RunStart::new("counted", "job", None, "runner", 1).alive_for(lease);
    provider.run_started(&start).await.unwrap();
    let started = cost();
    assert!(provider.run_alive(&start, lease).await.unwrap());
    let alive = cost();
    provider
        .run_finished(&start, &RunEnd::succeeded())
        .await
        .unwrap();
    let ended = cost();
    assert_eq!(
        [started, alive, ended],
        D::RUN_STATEMENTS,
        "statements for [start, heartbeat, end]"
    );

    const RUNS: u64 = 40;
    const KEEP: u32 = 4;
    let small = keeping(&provider, shedlock_core::DEFAULT_RUN_RETENTION, KEEP);
    cost();
    for token in 1..=RUNS {
        let start = RunStart::new("trimmed", "job", None, "runner", token);
        small.run_started(&start).await.unwrap();
        small
            .run_finished(&start, &RunEnd::succeeded())
            .await
            .unwrap();
    }
    let total = cost();
    let per_run = D::RUN_STATEMENTS[0] + D::RUN_STATEMENTS[2];
    let trims = total - per_run * RUNS as usize;
    println!(
        "{}: {total} statements for {RUNS} runs with runs_per_lock({KEEP}): {per_run} per run \
         and {trims} trims",
        std::any::type_name::<D::Dialect>()
    );
    assert!(
        trims <= (RUNS / u64::from(RUN_TRIM_SLACK / 2)) as usize + 1,
        "{trims} trims for {RUNS} runs"
    );
    let kept = rows_of(db, &provider, "trimmed").await;
    assert!(kept <= i64::from(KEEP + RUN_TRIM_SLACK), "{kept} rows kept");
    drop_table(db, provider.table()).await;
}

/// What a tick of many runs costs besides its claim: 300 runs' record starts, ends and
/// releases, each called on its own as the scheduler's run tasks do (all at once), go out in
/// a few statements where the database batches them (`D::TOGETHER_STATEMENTS`: at most so
/// many per batch, for starts, ends and releases; the first call of each kind goes alone and
/// the rest join batches while one is in flight), each answered as alone. A lease no longer
/// live is not released; an end whose start is missing is recorded whole; an end already
/// recorded stays.
pub(crate) async fn runs_made_together_share_statements<D: TestDb>(db: &D) {
    use shedlock_core::{LockInspector as _, LockLease, LockProvider as _, LockQuery};
    use tokio::task::JoinHandle;

    const RUNS: usize = 300;
    statements::record();
    let provider = fresh(db, "together").await;
    let table = provider.table().to_owned();
    let configs: Vec<_> = (0..RUNS)
        .map(|i| super::config(&format!("run{i}"), Duration::from_secs(60), Duration::ZERO))
        .collect();
    let leases: Vec<LockLease> = provider
        .acquire_many(&configs)
        .await
        .into_iter()
        .map(|lease| lease.unwrap().expect("free"))
        .collect();
    let start = |lease: &LockLease| {
        RunStart::new(lease.name(), "job", None, "together", lease.fencing_token())
    };
    async fn together<T>(calls: Vec<JoinHandle<T>>) -> Vec<T> {
        let mut answers = Vec::with_capacity(calls.len());
        for call in calls {
            answers.push(call.await.unwrap());
        }
        answers
    }
    let mut before = statements::executed_on(&table);
    let mut cost = || {
        let now = statements::executed_on(&table);
        std::mem::replace(&mut before, now).abs_diff(now)
    };
    cost();

    // Run 0's start is never recorded (its write failed, say): its end is recorded whole.
    together(
        leases[1..]
            .iter()
            .map(|lease| {
                let (provider, start) = (provider.clone(), start(lease));
                tokio::spawn(async move {
                    let record = provider.run_started(&start).await.unwrap();
                    assert_eq!(record.lock, start.lock);
                    assert_eq!(record.fencing_token, start.fencing_token);
                    assert_eq!(record.outcome, RunOutcome::Running);
                })
            })
            .collect(),
    )
    .await;
    let starts = cost();
    // Run 1 was ended already (another instance marked it interrupted): that end stays.
    let interrupted = RunEnd::with_error(RunOutcome::Interrupted, "holder gone");
    provider
        .run_finished(&start(&leases[1]), &interrupted)
        .await
        .unwrap();
    cost();
    together(
        leases
            .iter()
            .enumerate()
            .map(|(i, lease)| {
                let (provider, start) = (provider.clone(), start(lease));
                let end = if i.is_multiple_of(2) {
                    RunEnd::succeeded()
                } else {
                    RunEnd::with_error(RunOutcome::Failed, format!("failure {i}"))
                };
                tokio::spawn(async move { provider.run_finished(&start, &end).await.unwrap() })
            })
            .collect(),
    )
    .await;
    let ends = cost();

    // Lease 2 was taken over after it expired: its release changes nothing.
    db.execute(&format!(
        "UPDATE {table} SET fencing_token = fencing_token + 1, locked_by = 'other' \
         WHERE name = 'run2'"
    ))
    .await;
    cost();
    let released = together(
        leases
            .iter()
            .map(|lease| {
                let (provider, lease) = (provider.clone(), lease.clone());
                tokio::spawn(async move { provider.release(&lease).await.unwrap() })
            })
            .collect(),
    )
    .await;
    let releases = cost();
    println!(
        "{}: {RUNS} runs made together: {starts} statements for their starts, {ends} for \
         their ends, {releases} for their releases",
        std::any::type_name::<D::Dialect>()
    );

    assert!(!released[2], "a lease taken over was released");
    assert!(
        released.iter().enumerate().all(|(i, &ok)| ok || i == 2),
        "a live lease was not released"
    );
    let rows = provider.list_locks(&LockQuery::all()).await.unwrap();
    let held: Vec<&str> = rows
        .iter()
        .filter(|row| row.held)
        .map(|row| row.name.as_str())
        .collect();
    assert_eq!(held, ["run2"], "only the lease taken over is still held");
    let records = provider.runs(&RunQuery::all()).await.unwrap();
    assert_eq!(records.len(), RUNS);
    for record in &records {
        let i: usize = record.lock["run".len()..].parse().unwrap();
        let (outcome, error) = match i {
            1 => (RunOutcome::Interrupted, Some("holder gone".to_owned())),
            _ if i.is_multiple_of(2) => (RunOutcome::Succeeded, None),
            _ => (RunOutcome::Failed, Some(format!("failure {i}"))),
        };
        assert_eq!(
            (record.outcome, &record.error),
            (outcome, &error),
            "{}",
            record.lock
        );
        assert_eq!(record.fencing_token, leases[i].fencing_token());
    }
    // Ten batches at most: the first call alone, the others while one is in flight.
    for ((what, count), per_batch) in [("starts", starts), ("ends", ends), ("releases", releases)]
        .into_iter()
        .zip(D::TOGETHER_STATEMENTS)
    {
        assert!(
            count <= 10 * per_batch,
            "{count} statements for {RUNS} {what}"
        );
    }
    drop_table(db, &table).await;
}

/// Runs whose instance dies before their end (no end is ever recorded) still leave a bounded
/// history, whichever instance starts them: every start trims its lock. A run whose heartbeat
/// is live is never trimmed, however many runs follow it.
pub(crate) async fn runs_stay_bounded_when_runs_never_end<D: TestDb>(db: &D) {
    const KEEP: u32 = 3;
    const RUNS: u64 = 40;
    let provider = fresh(db, "first").await;
    let retention = shedlock_core::DEFAULT_RUN_RETENTION;
    let instances = [
        keeping(&provider, retention, KEEP),
        keeping(&provider, retention, KEEP),
    ];
    let (a, b) = (unique_lock_name("never-a"), unique_lock_name("never-b"));
    for token in 1..=RUNS {
        for (i, lock) in [&a, &b].into_iter().enumerate() {
            let instance = &instances[(token as usize + i) % 2];
            let start = RunStart::new(lock, "job", None, format!("host:{token}"), token);
            instance.run_started(&start).await.unwrap();
        }
    }
    for lock in [&a, &b] {
        let kept = rows_of(db, &provider, lock).await;
        assert!(
            kept <= i64::from(KEEP + RUN_TRIM_SLACK),
            "{lock} keeps {kept} rows of runs that never ended"
        );
        let newest = instances[0]
            .runs(&RunQuery::lock(lock).limit(KEEP as usize))
            .await
            .unwrap();
        let tokens: Vec<u64> = newest.iter().map(|r| r.fencing_token).collect();
        assert_eq!(tokens, [RUNS, RUNS - 1, RUNS - 2], "the newest are kept");
    }

    let live = unique_lock_name("never-live");
    let lease = Duration::from_secs(600);
    let first = RunStart::new(&live, "job", None, "slow", 1).alive_for(lease);
    instances[0].run_started(&first).await.unwrap();
    for token in 2..=30 {
        let start = RunStart::new(&live, "job", None, "next", token);
        instances[1].run_started(&start).await.unwrap();
        instances[1]
            .run_finished(&start, &RunEnd::succeeded())
            .await
            .unwrap();
    }
    assert!(
        instances[0].run_alive(&first, lease).await.unwrap(),
        "a live run's record was trimmed"
    );
    assert!(rows_of(db, &provider, &live).await <= i64::from(KEEP + RUN_TRIM_SLACK + 1));
    drop_table(db, provider.table()).await;
}

/// A run table made before the two indexes (one on `started_at` instead) works as it is, run
/// heartbeats included (they need no new column); `create_schema` then adds the indexes and
/// drops the one they replace, keeping every row, and running it again changes nothing.
pub(crate) async fn run_tables_made_before_keep_working<D: TestDb>(db: &D) {
    let table = unique_table("shedlock_old");
    let provider = db
        .build(&table, ColumnNames::default(), "old")
        .expect("valid configuration");
    let r = provider.runs_table().to_owned();
    for statement in D::OLD_RUN_TABLE.replace("{r}", &r).split(';') {
        if !statement.trim().is_empty() {
            db.execute(statement).await;
        }
    }
    let lock = unique_lock_name("old-table");
    let plain = RunStart::new(&lock, "job", None, "old", 1);
    provider.run_started(&plain).await.unwrap();
    provider
        .run_finished(&plain, &RunEnd::with_error(RunOutcome::Failed, "boom"))
        .await
        .unwrap();
    let lease = Duration::from_secs(60);
    let running = RunStart::new(&lock, "job", None, "old", 2).alive_for(lease);
    let started = provider.run_started(&running).await.unwrap();
    assert!(
        started.alive_until.is_some(),
        "a heartbeat without a new column"
    );
    assert!(provider.run_alive(&running, lease).await.unwrap());
    let before = provider.runs(&RunQuery::lock(&lock)).await.unwrap();
    assert_eq!(before.len(), 2);
    assert_eq!(
        (before[0].finished_at, before[1].outcome),
        (None, RunOutcome::Failed),
        "a running record has no end; the heartbeat is not one"
    );

    let names = || async {
        let mut names = db.texts(&D::INDEX_NAMES.replace("{r}", &r)).await;
        names.retain(|name| !name.to_lowercase().contains("autoindex"));
        names.sort();
        names
    };
    assert!(
        names()
            .await
            .iter()
            .any(|n| n.ends_with("started") || n.ends_with("started_at"))
    );
    for _ in 0..2 {
        provider.create_schema().await.expect("create schema");
        let names = names().await;
        let new = names.iter().filter(|n| n.ends_with("newest")).count();
        let replaced = names
            .iter()
            .any(|n| n.ends_with("started") || n.ends_with("started_at"));
        assert!(new == 2 && !replaced, "{names:?}");
    }
    let after = provider.runs(&RunQuery::lock(&lock)).await.unwrap();
    assert_eq!(after.len(), 2, "rows kept");
    assert!(after[0].alive_until.is_some());
    drop_table(db, &table).await;
}

/// A month of a 200-job fleet's history (`shedlock_conformance::longevity`) against a
/// day of it: the rows the run table holds, counted in the database, stay within every lock's
/// bound, and the figures are printed.
pub(crate) async fn a_month_of_history_stays_within_the_bounds<D: TestDb>(db: &D) {
    let provider = fresh(db, "longevity").await;
    let harness = harness_over(provider.clone());
    let r = provider.runs_table().to_owned();
    let dialect = std::any::type_name::<D::Dialect>();
    let mut kept = Vec::new();
    for days in [1, 30] {
        let figures = month_of_history(&harness, days).await;
        println!("{dialect}, {figures}");
        let prefix = &figures.prefix;
        let rows = db
            .scalar(&format!(
                "SELECT COUNT(*) FROM {r} WHERE lock_name LIKE '{prefix}%'"
            ))
            .await;
        let most = db
            .scalar(&format!(
                "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM {r} \
                 WHERE lock_name LIKE '{prefix}-%' GROUP BY lock_name) AS per_lock"
            ))
            .await;
        assert!(
            most <= figures.bound_per_lock as i64,
            "a lock holds {most} rows, past {}",
            figures.bound_per_lock
        );
        // The fleet's records as read back, and the marker's.
        assert_eq!(rows, figures.kept as i64 + 1, "rows in the run table");
        println!(
            "{dialect}, {days} day(s): {rows} rows in the run table, at most {most} per lock \
             ({} locks)",
            LOCKS
        );
        kept.push(rows);
    }
    let bound = i64::from(RUNS_PER_LOCK + RUN_TRIM_SLACK);
    assert!(kept[1] <= (LOCKS as i64 + 1) * bound);
    drop_table(db, provider.table()).await;
}

/// Pages across locks order records as `RunCursor` does, rows of the same start, token and
/// attempt by lock name in byte order, and page through such ties without gaps or repeats.
pub(crate) async fn run_pages_order_ties_by_lock<D: TestDb>(db: &D) {
    let provider = fresh(db, "ties").await;
    let r = provider.runs_table().to_owned();
    let prefix = unique_lock_name("tie");
    // Byte order: 'B' < 'a' < 'é'; a collation that ignores case or accents orders them apart.
    let locks = [
        format!("{prefix}-a"),
        format!("{prefix}-B"),
        format!("{prefix}-é"),
    ];
    for lock in &locks {
        db.execute(&format!(
            "INSERT INTO {r} (lock_name, fencing_token, attempt, job, tick, holder, started_at, \
             finished_at, outcome, error) VALUES ('{lock}', 5, 1, 'job', NULL, 'h', \
             '2001-01-01 00:00:00.000', '2001-01-01 00:00:01.000', 'succeeded', NULL)"
        ))
        .await;
    }
    let mut query = RunQuery::all().limit(1);
    let mut seen = Vec::new();
    while let Some(record) = provider.runs(&query).await.unwrap().pop() {
        if !record.lock.starts_with(&prefix) {
            break;
        }
        query = query.before(record.cursor());
        seen.push(record);
    }
    let mut expected = locks.to_vec();
    expected.sort_unstable_by(|a, b| b.cmp(a));
    let order: Vec<&str> = seen.iter().map(|r| r.lock.as_str()).collect();
    assert_eq!(
        order, expected,
        "newest first, ties by lock name, each once"
    );
    for lock in &locks {
        let one = provider
            .runs(&RunQuery::lock(lock).before(seen[0].cursor()))
            .await
            .unwrap();
        let expected = usize::from(lock != &seen[0].lock);
        assert_eq!(one.len(), expected, "{lock} before {:?}", seen[0].lock);
    }
    drop_table(db, provider.table()).await;
}

/// Rows past the retention go in batches of at most 1000 per start, oldest first, so a start
/// never turns into a long delete (a retention lowered on a large table), and the next starts
/// take the rest.
pub(crate) async fn aged_rows_go_in_batches<D: TestDb>(db: &D) {
    const AGED: usize = 2500;
    let provider = fresh(db, "aged").await;
    let r = provider.runs_table().to_owned();
    let old = unique_lock_name("aged-old");
    let rows: Vec<String> = (1..=AGED)
        .map(|token| {
            // A millisecond apart, as runs are.
            let at = format!("2001-01-01 00:00:{:02}.{:03}", token / 1000, token % 1000);
            format!("('{old}', {token}, 1, 'job', NULL, 'h', '{at}', '{at}', 'succeeded', NULL)")
        })
        .collect();
    db.execute(&format!(
        "INSERT INTO {r} (lock_name, fencing_token, attempt, job, tick, holder, started_at, \
         finished_at, outcome, error) VALUES {}",
        rows.join(", ")
    ))
    .await;
    let log = keeping(&provider, Duration::from_secs(3600), 1000);
    let busy = unique_lock_name("aged-busy");
    let mut left = Vec::new();
    for token in 1..=3 {
        let start = RunStart::new(&busy, "job", None, "a", token);
        log.run_started(&start).await.unwrap();
        log.run_finished(&start, &RunEnd::succeeded())
            .await
            .unwrap();
        left.push(rows_of(db, &provider, &old).await);
    }
    assert_eq!(
        left,
        [1500, 500, 0],
        "rows past the retention left after each start"
    );
    drop_table(db, provider.table()).await;
}
