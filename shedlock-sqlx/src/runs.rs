//! Run records in a second table beside the lock table (`<table>_runs` by default): one row per
//! attempt of a run, keyed by lock, fencing token and attempt.
//!
//! What keeps the table bounded, by construction: every start deletes its lock's rows past
//! the newest `runs_per_lock`, and every row past the retention, in the start's own statement
//! (PostgreSQL) or, where a read after the start finds a lock more than [`TRIM_BATCH`] rows
//! over or a row past the retention, in a statement after it (MySQL, SQLite). A run whose
//! heartbeat is live is never deleted.
//!
//! [`TRIM_BATCH`]: crate::dialect::runs::TRIM_BATCH

use std::time::{Duration, SystemTime};

use chrono::{NaiveDate, NaiveDateTime};
use shedlock_core::{
    Error, Operation, RunCursor, RunEnd, RunLog, RunOutcome, RunQuery, RunRecord, RunStart,
    async_trait,
};

use std::collections::HashMap;
use std::sync::Arc;

use crate::dialect::Ending;
use crate::dialect::RunDialect;
use crate::provider::combine::{Combiner, Keyed};
use crate::provider::retry::{Retry, run};
use crate::{Dialect, SqlLockProvider, system_time, token_param};

/// `<table>_runs` (in the table's schema); when that is longer than an identifier may be, the
/// table's name is cut and a hash of it (FNV-1a, the same in every process and build) keeps
/// the run tables of different lock tables apart.
pub(crate) fn default_runs_table(table: &str) -> String {
    let (schema, name) = match table.split_once('.') {
        Some((schema, name)) => (format!("{schema}."), name),
        None => (String::new(), table),
    };
    format!("{schema}{}", fitted(name, "runs"))
}

/// `<name>_<suffix>`, cut and given a hash of `name` when longer than an identifier may be.
fn fitted(name: &str, suffix: &str) -> String {
    let whole = format!("{name}_{suffix}");
    if whole.len() <= crate::names::MAX_IDENTIFIER_LEN {
        return whole;
    }
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let suffix = format!("_{hash:016x}_{suffix}");
    // Identifiers are ASCII (validated), so any cut is a character boundary.
    let cut = crate::names::MAX_IDENTIFIER_LEN - suffix.len();
    format!("{}{suffix}", &name[..cut])
}

/// The name of an index of the run table `table` (unqualified): `<table>_<suffix>`, cut and
/// hashed like [`default_runs_table`] to fit an identifier.
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) fn index_name(table: &str, suffix: &str) -> String {
    fitted(table, suffix)
}

/// The run table and what is kept of it.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct RunTable {
    pub(crate) name: String,
    pub(crate) retention: Duration,
    pub(crate) per_lock: u32,
}

/// The columns of the dialects' run queries, in order.
pub(crate) type RunRow = (
    String,
    i64,
    i32,
    String,
    Option<NaiveDateTime>,
    String,
    NaiveDateTime,
    Option<NaiveDateTime>,
    String,
    Option<String>,
);

/// The run table's key, as every dialect's statements name it.
pub(crate) const RUN_KEY: &str = "lock_name, fencing_token, attempt";

/// The column list every dialect selects, in [`RunRow`] order.
pub(crate) const RUN_COLUMNS: &str = "lock_name, fencing_token, attempt, job, tick, holder, \
     started_at, finished_at, outcome, error";

/// A run's key and start as bound into the statements.
#[doc(hidden)]
#[derive(Debug, Clone, Copy)]
pub struct RunArgs<'a> {
    pub(crate) lock: &'a str,
    pub(crate) token: i64,
    pub(crate) attempt: i32,
    pub(crate) job: &'a str,
    pub(crate) tick: Option<NaiveDateTime>,
    pub(crate) holder: &'a str,
    /// The run's heartbeat lease, if it has one.
    pub(crate) lease: Option<Duration>,
}

/// A page of a [`RunQuery`] as the list statements bind it: no `since` or `before` is written
/// as a bound past every row, so each statement has one plan, served by an index.
#[doc(hidden)]
#[derive(Debug, Clone)]
pub struct Page {
    /// Rows started at or after this.
    pub(crate) since: NaiveDateTime,
    /// Rows before this position: start, token, attempt, lock (only rows at the same start,
    /// token and attempt are compared by lock; byte order).
    pub(crate) before: (NaiveDateTime, i64, i32, String),
    /// The most rows.
    pub(crate) limit: i64,
}

/// Before any row: the earliest `DATETIME` MySQL takes.
fn earliest() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(1000, 1, 1)
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .unwrap_or(NaiveDateTime::MIN)
}

/// After any row: the latest `DATETIME(3)` MySQL and SQLite's text hold.
fn latest() -> NaiveDateTime {
    NaiveDate::from_ymd_opt(9999, 12, 31)
        .and_then(|d| d.and_hms_milli_opt(23, 59, 59, 999))
        .unwrap_or(NaiveDateTime::MAX)
}

impl Page {
    /// `query`'s page for a table whose times have `precision`: `since` rounded up and the
    /// cursor down to it (a cursor between two representable times also takes every row at
    /// the earlier one), tokens and attempts past what the columns hold cut to their largest.
    pub(crate) fn of(query: &RunQuery, precision: Duration) -> Self {
        let limit = query
            .limit
            .map_or(i64::MAX, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
        let since = query.since.map_or_else(earliest, |since| {
            let (floor, cut) = floor(since, precision);
            let up = if cut {
                floor.checked_add_signed(chrono::TimeDelta::from_std(precision).unwrap_or_default())
            } else {
                Some(floor)
            };
            up.unwrap_or_else(latest).max(earliest())
        });
        let none = || (latest(), i64::MAX, i32::MAX, String::new());
        let before = query.before.as_ref().map_or_else(none, |cursor| {
            let RunCursor {
                started_at,
                fencing_token,
                attempt,
                lock,
                ..
            } = cursor;
            let (time, cut) = floor(*started_at, precision);
            match (i64::try_from(*fencing_token), i32::try_from(*attempt), cut) {
                (Ok(token), Ok(attempt), false) => (time, token, attempt, lock.clone()),
                // Past every row at `time`: all of them come before it.
                _ => (time, i64::MAX, i32::MAX, String::new()),
            }
        });
        Page {
            since,
            before: (
                before.0.clamp(earliest(), latest()),
                before.1,
                before.2,
                before.3,
            ),
            limit,
        }
    }
}

/// `time` in UTC rounded down to `precision`, and whether anything was cut.
fn floor(time: SystemTime, precision: Duration) -> (NaiveDateTime, bool) {
    let utc = chrono::DateTime::<chrono::Utc>::from(time).naive_utc();
    let step = precision.as_nanos().max(1);
    let nanos = u128::from(utc.nanosecond());
    let kept = u32::try_from(nanos / step * step).unwrap_or(0);
    (
        utc.with_nanosecond(kept).unwrap_or(utc),
        u128::from(kept) != nanos,
    )
}

fn args(start: &RunStart) -> Result<RunArgs<'_>, Error> {
    let invalid = |what: &str| Error::store(Operation::Runs, &start.lock, what.to_owned());
    Ok(RunArgs {
        lock: &start.lock,
        token: token_param(start.fencing_token)
            .ok_or_else(|| invalid("fencing token past what the table holds"))?,
        attempt: i32::try_from(start.attempt).map_err(|_| invalid("attempt out of range"))?,
        job: &start.job,
        tick: start.tick.map(naive),
        holder: &start.holder,
        lease: start.lease,
    })
}

/// A UTC time as the tables hold it, in whole milliseconds.
pub(crate) fn naive(time: SystemTime) -> NaiveDateTime {
    floor(time, Duration::from_millis(1)).0
}

use chrono::Timelike as _;

/// A row as a record. A running row's `finished_at` holds its heartbeat deadline: it is the
/// record's `alive_until`, and its `finished_at` is none.
fn record(row: RunRow) -> Result<RunRecord, Error> {
    let (lock, token, attempt, job, tick, holder, started, finished, outcome, error) = row;
    let unreadable = |what: String| Error::store(Operation::Runs, lock.clone(), what);
    let outcome = RunOutcome::parse(&outcome)
        .ok_or_else(|| unreadable(format!("unknown run outcome {outcome:?}")))?;
    let mut record = RunRecord::started(
        &RunStart::new(
            lock.clone(),
            job,
            tick.map(system_time),
            holder,
            u64::try_from(token).map_err(|_| unreadable(format!("negative token {token}")))?,
        )
        .attempt(u32::try_from(attempt).map_err(|_| unreadable(format!("attempt {attempt}")))?),
        system_time(started),
    );
    record.outcome = outcome;
    if outcome == RunOutcome::Running {
        record.alive_until = finished.map(system_time);
    } else {
        record.finished_at = finished.map(system_time);
    }
    record.error = error;
    Ok(record)
}

impl<D: Dialect> SqlLockProvider<D> {
    /// The statements that read a page of one lock's runs and of every lock's, and the one
    /// that records a start (with its trims, on PostgreSQL), for `EXPLAIN` in tests and by
    /// operators. Not a stable API.
    #[doc(hidden)]
    pub fn run_sql(&self) -> [&str; 3] {
        let sql = &self.run_sql;
        [
            sql.list_lock.as_str(),
            sql.list_all.as_str(),
            sql.started.as_str(),
        ]
    }
}

/// The starts and ends of runs that go out together where the dialect batches them
/// ([`combine`](crate::provider::combine)), shared by a provider's clones.
#[derive(Debug, Default)]
pub(crate) struct RunWrites {
    starts: Arc<Combiner<RunStart, Result<RunRecord, Error>>>,
    ends: Arc<Combiner<(RunStart, RunEnd), Result<(), Error>>>,
}

impl Keyed for RunStart {
    type Key = (String, u64, u32);
    fn key(&self) -> Self::Key {
        (self.lock.clone(), self.fencing_token, self.attempt)
    }
}

impl Keyed for (RunStart, RunEnd) {
    type Key = (String, u64, u32);
    fn key(&self) -> Self::Key {
        self.0.key()
    }
}

impl<D: Dialect> SqlLockProvider<D> {
    async fn start_alone(&self, start: &RunStart) -> Result<RunRecord, Error> {
        let args = args(start)?;
        let sql = &*self.run_sql;
        let row = run!(self, |c| <D::Runs as RunDialect>::started(c, sql, args))
            .map_err(|e| self.operation_error(Operation::Runs, &start.lock, e))?;
        record(row)
    }

    async fn finish_alone(&self, start: &RunStart, end: &RunEnd) -> Result<(), Error> {
        let args = args(start)?;
        let (sql, outcome, error) = (&*self.run_sql, end.outcome.as_str(), end.error.as_deref());
        run!(self, |c| <D::Runs as RunDialect>::finished(
            c, sql, args, outcome, error
        ))
        .map_err(|e| self.operation_error(Operation::Runs, &start.lock, e))
    }

    /// Starts that came together (distinct runs): one alone, more in one statement. `None`
    /// when that statement failed: each goes alone, for its own error.
    async fn starts_together(
        &self,
        starts: Vec<RunStart>,
    ) -> Option<Vec<Result<RunRecord, Error>>> {
        if let [start] = starts.as_slice() {
            return Some(vec![self.start_alone(start).await]);
        }
        let runs = starts
            .iter()
            .map(args)
            .collect::<Result<Vec<_>, _>>()
            .ok()?;
        let (sql, runs) = (&*self.run_sql, runs.as_slice());
        let rows = match run!(self, |c| <D::Runs as RunDialect>::started_many(
            c, sql, runs
        )) {
            Ok(rows) => rows,
            Err(error) => {
                let error = error.map(|e| e.to_string());
                tracing::debug!(
                    ?error,
                    runs = starts.len(),
                    "batched run starts failed; one by one"
                );
                return None;
            }
        };
        let mut rows: HashMap<(String, i64, i32), RunRow> = rows
            .into_iter()
            .map(|row| ((row.0.clone(), row.1, row.2), row))
            .collect();
        Some(
            starts
                .iter()
                .zip(runs)
                .map(|(start, run)| {
                    let row = rows
                        .remove(&(run.lock.to_owned(), run.token, run.attempt))
                        .ok_or_else(|| {
                            Error::store(
                                Operation::Runs,
                                &start.lock,
                                "the run upsert returned no row",
                            )
                        })?;
                    record(row)
                })
                .collect(),
        )
    }

    /// Ends that came together (distinct runs), as [`starts_together`](Self::starts_together).
    async fn ends_together(&self, ends: Vec<(RunStart, RunEnd)>) -> Option<Vec<Result<(), Error>>> {
        if let [(start, end)] = ends.as_slice() {
            return Some(vec![self.finish_alone(start, end).await]);
        }
        let runs: Vec<Ending<'_>> = ends
            .iter()
            .map(|(start, end)| {
                Ok::<_, Error>((args(start)?, end.outcome.as_str(), end.error.as_deref()))
            })
            .collect::<Result<_, _>>()
            .ok()?;
        let (sql, runs) = (&*self.run_sql, runs.as_slice());
        match run!(self, |c| <D::Runs as RunDialect>::finished_many(
            c, sql, runs
        )) {
            Ok(()) => Some(ends.iter().map(|_| Ok(())).collect()),
            Err(error) => {
                let error = error.map(|e| e.to_string());
                tracing::debug!(
                    ?error,
                    runs = ends.len(),
                    "batched run ends failed; one by one"
                );
                None
            }
        }
    }
}

#[async_trait]
impl<D: Dialect> RunLog for SqlLockProvider<D> {
    async fn run_started(&self, start: &RunStart) -> Result<RunRecord, Error> {
        let max = <D::Runs as RunDialect>::MAX_BATCH;
        if max > 1 && args(start).is_ok() {
            let provider = self.clone();
            let send = move |starts: Vec<RunStart>| {
                let provider = provider.clone();
                async move { provider.starts_together(starts).await }
            };
            let starts = &self.run_writes.starts;
            if let Some(record) = starts.submit(start.clone(), max, send).await {
                return record;
            }
        }
        self.start_alone(start).await
    }

    async fn run_finished(&self, start: &RunStart, end: &RunEnd) -> Result<(), Error> {
        let max = <D::Runs as RunDialect>::MAX_BATCH;
        if max > 1 && args(start).is_ok() {
            let provider = self.clone();
            let send = move |ends: Vec<(RunStart, RunEnd)>| {
                let provider = provider.clone();
                async move { provider.ends_together(ends).await }
            };
            let ends = &self.run_writes.ends;
            if let Some(done) = ends.submit((start.clone(), end.clone()), max, send).await {
                return done;
            }
        }
        self.finish_alone(start, end).await
    }

    async fn run_alive(&self, start: &RunStart, lease: Duration) -> Result<bool, Error> {
        let args = args(start)?;
        let sql = &*self.run_sql;
        run!(self, |c| <D::Runs as RunDialect>::alive(
            c, sql, args, lease
        ))
        .map_err(|e| self.operation_error(Operation::Runs, &start.lock, e))
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        let page = Page::of(query, <D::Runs as RunDialect>::PRECISION);
        // A SERIALIZABLE database may abort a read too (a pivot of concurrent writes): retried
        // like every other statement.
        let mut retry = Retry::new();
        let rows = loop {
            let lock = query.lock.as_deref();
            match <D::Runs as RunDialect>::list(&self.pool, &self.run_sql, lock, page.clone()).await
            {
                Err(e) if Retry::is_serialization_failure(&e) && retry.pause().await => {}
                rows => break rows,
            }
        }
        .map_err(|e| {
            crate::store_error(
                Operation::Runs,
                query.lock.as_deref().unwrap_or("*"),
                self.table_ref(),
                e,
            )
        })?;
        rows.into_iter().map(record).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_round_to_the_table_and_bound_what_is_missing() {
        let ms = Duration::from_millis(1);
        let at = SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 5_000_000);
        let exact = Page::of(&RunQuery::all().before(RunCursor::new(at, 7, 2, "l")), ms);
        assert_eq!(exact.before, (naive(at), 7, 2, "l".to_owned()));
        // Between two milliseconds: every row at the earlier one comes before it.
        let between = at + Duration::from_micros(300);
        let cut = Page::of(
            &RunQuery::all().before(RunCursor::new(between, 7, 2, "l")),
            ms,
        );
        assert_eq!(cut.before, (naive(at), i64::MAX, i32::MAX, String::new()));
        let since = Page::of(&RunQuery::all().since(between), ms);
        assert_eq!(since.since, naive(at + ms), "since rounds up");
        let all = Page::of(&RunQuery::all(), ms);
        assert!(all.since < naive(SystemTime::UNIX_EPOCH) && all.before.0 > naive(at));
        assert_eq!(all.limit, i64::MAX);
        let far = RunCursor::new(at, u64::MAX, u32::MAX, "l");
        let far = Page::of(&RunQuery::lock("l").before(far).limit(3), ms);
        assert_eq!(
            (far.before.1, far.before.2, far.limit),
            (i64::MAX, i32::MAX, 3)
        );
        let micros = Page::of(
            &RunQuery::all().before(RunCursor::new(between, 7, 2, "l")),
            Duration::from_micros(1),
        );
        assert_eq!((micros.before.1, micros.before.2), (7, 2), "kept at µs");
    }

    #[test]
    fn run_tables_fit_an_identifier_and_stay_apart() {
        assert_eq!(default_runs_table("shedlock"), "shedlock_runs");
        assert_eq!(default_runs_table("app.locks"), "app.locks_runs");
        let long = "a".repeat(60);
        let (one, two) = (
            default_runs_table(&long),
            default_runs_table(&format!("{long}b")),
        );
        assert!(
            one.len() <= 63 && two.len() <= 63 && one != two,
            "{one} {two}"
        );
        assert_eq!(one, default_runs_table(&long), "the same in every process");
        let index = index_name(&one, "lock_newest");
        assert!(index.len() <= 63 && index != index_name(&two, "lock_newest"));
    }
}
