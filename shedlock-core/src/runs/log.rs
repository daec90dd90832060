//! The run-record interface every store implements next to its lock provider.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use super::{RunCursor, RunEnd, RunRecord, RunStart};
use crate::Error;

/// Which runs [`RunLog::runs`] returns: newest first (by start, then fencing token, attempt
/// and lock: [`RunCursor`]). Stores answer it without reading more than it asks for (the lock,
/// the order, `before` and the limit go to the store), so a page costs the same after a month
/// of history as after a minute.
///
/// ```
/// use shedlock_core::RunQuery;
///
/// let last_ten = RunQuery::lock("nightly-report").limit(10);
/// # let page = Vec::<shedlock_core::RunRecord>::new();
/// // The next ten: those older than the last record of this page.
/// if let Some(last) = page.last() {
///     let next_ten = RunQuery::lock("nightly-report").before(last.cursor()).limit(10);
///     # let _ = next_ten;
/// }
/// # let _ = last_ten;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunQuery {
    /// Only runs under this lock.
    pub lock: Option<String>,
    /// Only runs that started at or after this time (store clock).
    pub since: Option<SystemTime>,
    /// At most this many records; `None`: all the store keeps.
    pub limit: Option<usize>,
    /// Only records older than this position (the next page after a record).
    pub before: Option<RunCursor>,
}

impl RunQuery {
    /// Every run the store keeps.
    pub fn all() -> Self {
        RunQuery::default()
    }

    /// The runs under `lock`.
    pub fn lock(lock: impl Into<String>) -> Self {
        RunQuery {
            lock: Some(lock.into()),
            ..RunQuery::default()
        }
    }

    /// Only runs started at or after `since` (store clock).
    pub fn since(mut self, since: SystemTime) -> Self {
        self.since = Some(since);
        self
    }

    /// At most `limit` records, the newest.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Only records that come after `cursor` newest first: older than the record it was taken
    /// from ([`RunRecord::cursor`]).
    pub fn before(mut self, cursor: RunCursor) -> Self {
        self.before = Some(cursor);
        self
    }

    /// Whether `record` is one this query selects (lock, since, before; not the limit).
    pub fn matches(&self, record: &RunRecord) -> bool {
        self.lock.as_deref().is_none_or(|lock| record.lock == lock)
            && self.since.is_none_or(|since| record.started_at >= since)
            && self
                .before
                .as_ref()
                .is_none_or(|before| record.place() < before.place())
    }

    /// `records` of this query, newest first (by [`RunCursor`]), cut to the
    /// limit: for in-memory stores, and for merging pages a store read per lock.
    pub fn apply(&self, mut records: Vec<RunRecord>) -> Vec<RunRecord> {
        records.retain(|record| self.matches(record));
        records.sort_unstable_by(|a, b| b.place().cmp(&a.place()));
        if let Some(limit) = self.limit {
            records.truncate(limit);
        }
        records
    }
}

/// Records of every run, kept in the store beside the lock: written by the scheduler, read by
/// the API, the `shedlock runs` command and the dashboard.
///
/// A run is identified by its lock, fencing token and attempt. Its start is recorded while it
/// holds the lock, its end before the lock is released, so a record still running while its
/// lock is free (or held with another token) is a run whose instance died
/// ([`RunRecord::is_interrupted`]). Stores keep records for a retention their builder sets.
#[async_trait]
pub trait RunLog: Send + Sync + fmt::Debug + 'static {
    /// Records that `start` begins now (store clock), running. Writing the same start again
    /// changes nothing.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Runs`) when the store fails.
    async fn run_started(&self, start: &RunStart) -> Result<RunRecord, Error>;

    /// Records how the run `start` ended, now (store clock). Only a record still running
    /// changes: the first end recorded stays (a run an instance marked interrupted is not
    /// turned into a success by its stalled holder's late write). A missing start (its write
    /// failed) is recorded whole.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Runs`) when the store fails.
    async fn run_finished(&self, start: &RunStart, end: &RunEnd) -> Result<(), Error>;

    /// Renews the heartbeat of the run `start` while its job runs: if its record is still
    /// running and its heartbeat has not passed (store clock; a record without one counts as
    /// live), sets [`RunRecord::alive_until`] to now + `lease` and returns true. Returns
    /// false, writing nothing, when the record ended (another instance marked it interrupted),
    /// its heartbeat passed (another instance may rerun it now), or it is missing: the run
    /// must stop. A heartbeat that passed is never moved again, so an instance that saw it pass
    /// decides on a record that stays as it saw it.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Runs`) when the store fails.
    async fn run_alive(&self, start: &RunStart, lease: Duration) -> Result<bool, Error>;

    /// The records `query` asks for, newest first, reading no more than it asks for.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Runs`) when the store fails or holds a record it cannot
    /// read.
    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error>;
}

#[async_trait]
impl<L: RunLog + ?Sized> RunLog for Arc<L> {
    async fn run_started(&self, start: &RunStart) -> Result<RunRecord, Error> {
        (**self).run_started(start).await
    }
    async fn run_finished(&self, start: &RunStart, end: &RunEnd) -> Result<(), Error> {
        (**self).run_finished(start, end).await
    }
    async fn run_alive(&self, start: &RunStart, lease: Duration) -> Result<bool, Error> {
        (**self).run_alive(start, lease).await
    }
    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        (**self).runs(query).await
    }
}
