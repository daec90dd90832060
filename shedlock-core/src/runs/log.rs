//! The run-record interface every store implements next to its lock provider.

use std::fmt;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;

use super::{RunEnd, RunRecord, RunStart};
use crate::Error;

/// Which runs [`RunLog::runs`] returns: newest first.
///
/// ```
/// use shedlock_core::RunQuery;
///
/// let last_ten = RunQuery::lock("nightly-report").limit(10);
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

    /// `records` of this query, newest first (by start, then token and attempt), cut to the
    /// limit: for stores that read every record and filter afterwards.
    pub fn apply(&self, mut records: Vec<RunRecord>) -> Vec<RunRecord> {
        records.retain(|record| {
            self.lock.as_deref().is_none_or(|lock| record.lock == lock)
                && self.since.is_none_or(|since| record.started_at >= since)
        });
        records.sort_unstable_by(|a, b| {
            (b.started_at, b.fencing_token, b.attempt).cmp(&(
                a.started_at,
                a.fencing_token,
                a.attempt,
            ))
        });
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

    /// The records `query` asks for, newest first.
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
    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        (**self).runs(query).await
    }
}
