//! Run records in a second table beside the lock table (`<table>_runs` by default): one row per
//! attempt of a run, keyed by lock, fencing token and attempt.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use chrono::NaiveDateTime;
use shedlock_core::{
    Error, Operation, RunEnd, RunLog, RunOutcome, RunQuery, RunRecord, RunStart, async_trait,
};

use crate::dialect::RunDialect;
use crate::provider::retry::run;
use crate::{Dialect, SqlLockProvider, system_time, token_param};

/// Old records are deleted after every this many ends a provider records (on the lock just
/// ended, and by age on all), not after each: the hot path stays one statement.
const TRIM_EVERY: u64 = 32;

/// `<table>_runs` (in the table's schema); when that is longer than an identifier may be, the
/// table's name is cut and a hash of it (FNV-1a, the same in every process and build) keeps
/// the run tables of different lock tables apart.
pub(crate) fn default_runs_table(table: &str) -> String {
    let (schema, name) = match table.split_once('.') {
        Some((schema, name)) => (format!("{schema}."), name),
        None => (String::new(), table),
    };
    let runs = format!("{name}_runs");
    if runs.len() <= crate::identifier::MAX_IDENTIFIER_LEN {
        return format!("{schema}{runs}");
    }
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let suffix = format!("_{hash:016x}_runs");
    // Identifiers are ASCII (validated), so any cut is a character boundary.
    let cut = crate::identifier::MAX_IDENTIFIER_LEN - suffix.len();
    format!("{schema}{}{suffix}", &name[..cut])
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
}

/// Counts recorded ends, for trimming every [`TRIM_EVERY`].
#[derive(Debug, Default)]
pub(crate) struct Ends(AtomicU64);

impl Ends {
    fn due(&self) -> bool {
        self.0.fetch_add(1, Ordering::Relaxed) % TRIM_EVERY == TRIM_EVERY - 1
    }
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
    })
}

/// A UTC time as the tables hold it, in whole milliseconds.
pub(crate) fn naive(time: SystemTime) -> NaiveDateTime {
    let utc = chrono::DateTime::<chrono::Utc>::from(time).naive_utc();
    utc.with_nanosecond((utc.nanosecond() / 1_000_000) * 1_000_000)
        .unwrap_or(utc)
}

use chrono::Timelike as _;

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
    record.finished_at = finished.map(system_time);
    record.error = error;
    Ok(record)
}

#[async_trait]
impl<D: Dialect> RunLog for SqlLockProvider<D> {
    async fn run_started(&self, start: &RunStart) -> Result<RunRecord, Error> {
        let args = args(start)?;
        let sql = &*self.run_sql;
        let row = run!(self, |c| <D::Runs as RunDialect>::started(c, sql, args))
            .map_err(|e| self.operation_error(Operation::Runs, &start.lock, e))?;
        record(row)
    }

    async fn run_finished(&self, start: &RunStart, end: &RunEnd) -> Result<(), Error> {
        let args = args(start)?;
        let (sql, outcome, error) = (&*self.run_sql, end.outcome.as_str(), end.error.as_deref());
        run!(self, |c| <D::Runs as RunDialect>::finished(
            c, sql, args, outcome, error
        ))
        .map_err(|e| self.operation_error(Operation::Runs, &start.lock, e))?;
        if self.run_ends.due() {
            // Housekeeping: a failure is logged, never the run's.
            if let Err(error) =
                <D::Runs as RunDialect>::trim(&self.pool, sql, &self.run_table, &start.lock).await
            {
                tracing::warn!(%error, lock = %start.lock, "deleting old run records failed");
            }
        }
        Ok(())
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        let limit = query
            .limit
            .map_or(i64::MAX, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
        let rows = <D::Runs as RunDialect>::list(
            &self.pool,
            &self.run_sql,
            query.lock.as_deref(),
            query.since.map(naive),
            limit,
        )
        .await
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
    }
}
