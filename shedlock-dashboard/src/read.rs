//! What one page shows, read from the store at one moment. Every read is bounded by the
//! options, never by the history: a page of locks (`page_size`), and for each of them its
//! latest runs (`runs_per_job` listed, `timeline_runs` drawn), asked of the store with the
//! lock and the limit; a lock's older runs a page at a time, and one run by its cursor.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use futures_util::{StreamExt, TryStreamExt, stream};
use shedlock_core::{
    Error, LockInspector, LockProvider, LockQuery, LockRecord, RunCursor, RunLog, RunOutcome,
    RunQuery, RunRecord,
};

use crate::DashboardOptions;

/// Runs of one lock listed on its own page, before the link to the next.
pub(crate) const HISTORY_PAGE: usize = 50;
/// Locks whose runs are read at the same time.
const PARALLEL_READS: usize = 8;

/// What the page's query string asks for: the jobs (a page of them, by prefix and after a
/// name), the locks (`view=locks`, paged the same way), one lock's runs (`lock`, older than
/// `before`), or one run (`run`, its cursor).
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub(crate) struct PageQuery {
    /// Which listing: `locks`, or else the jobs.
    #[serde(default)]
    pub(crate) view: Option<String>,
    /// Only names starting with this.
    #[serde(default)]
    pub(crate) prefix: String,
    /// Names after this one (the next page).
    #[serde(default)]
    pub(crate) after: String,
    /// One lock's runs.
    #[serde(default)]
    pub(crate) lock: Option<String>,
    /// Its runs older than this cursor.
    #[serde(default)]
    pub(crate) before: Option<String>,
    /// The run of this cursor (which names its lock), in full.
    #[serde(default)]
    pub(crate) run: Option<String>,
}

/// One lock of the page and its latest runs.
#[derive(Debug)]
pub(crate) struct LockRuns {
    /// Newest first, at most [`DashboardOptions::runs_read_per_lock`].
    pub(crate) runs: Vec<RunRecord>,
    /// The read was cut at its limit: the lock has older runs.
    pub(crate) more: bool,
}

/// Everything the overview shows.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) store_time: SystemTime,
    /// How far back the timeline reaches.
    pub(crate) timeline: Duration,
    /// Latest runs of each lock drawn on it.
    pub(crate) timeline_runs: usize,
    pub(crate) locks: Vec<LockRecord>,
    /// The last name of a full page: there may be more after it.
    pub(crate) next_page: Option<String>,
    pub(crate) elections: Vec<(String, Option<LockRecord>)>,
    /// Per lock of the page (by name), its latest runs; `None` when the store keeps no run
    /// records. Also runs under names the store has no lock record of, when some of the
    /// store's newest runs are (at most `page_size` more names).
    pub(crate) runs: Option<BTreeMap<String, LockRuns>>,
}

impl Snapshot {
    /// The run's outcome as the page shows it ([`shown_outcome`]).
    pub(crate) fn outcome(&self, run: &RunRecord) -> RunOutcome {
        let lock = self.locks.iter().find(|lock| lock.name == run.lock);
        shown_outcome(run, lock, self.store_time)
    }
}

/// The run's outcome as a page shows it: a run still marked running whose lease is gone and
/// whose heartbeat has passed (or that has none) is shown interrupted.
pub(crate) fn shown_outcome(
    run: &RunRecord,
    lock: Option<&LockRecord>,
    now: SystemTime,
) -> RunOutcome {
    let live = lock.filter(|lock| lock.held).map(|lock| lock.fencing_token);
    if run.is_interrupted(live.unwrap_or(0), live.is_some(), now) {
        RunOutcome::Interrupted
    } else {
        run.outcome
    }
}

/// Why a page could not be read.
#[derive(Debug)]
pub(crate) enum Unreadable {
    /// The provider offers no inspection.
    NoInspector,
    /// The provider keeps no run records (a page of runs was asked for).
    NoRunLog,
    /// The query string names no run cursor.
    BadCursor(Error),
    /// The store failed.
    Store(Error),
}

impl PageQuery {
    /// Whether the locks are asked for rather than the jobs.
    pub(crate) fn locks_view(&self) -> bool {
        self.view.as_deref() == Some("locks")
    }
}

impl From<Error> for Unreadable {
    fn from(error: Error) -> Self {
        Unreadable::Store(error)
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::NoInspector => f.write_str("this lock store offers no inspection"),
            Unreadable::NoRunLog => f.write_str("this lock store keeps no run records"),
            Unreadable::BadCursor(error) | Unreadable::Store(error) => error.fmt(f),
        }
    }
}

fn inspector(provider: &dyn LockProvider) -> Result<&dyn LockInspector, Unreadable> {
    provider.inspector().ok_or(Unreadable::NoInspector)
}

fn run_log(provider: &dyn LockProvider) -> Result<&dyn RunLog, Unreadable> {
    provider.run_log().ok_or(Unreadable::NoRunLog)
}

fn cursor(text: Option<&str>) -> Result<Option<RunCursor>, Unreadable> {
    text.filter(|text| !text.is_empty())
        .map(|text| text.parse().map_err(Unreadable::BadCursor))
        .transpose()
}

/// The overview: a page of locks, the elections, and per lock of the page its latest runs
/// (and of the locks without a lock record among the store's newest runs, those whose names
/// fall in this page).
pub(crate) async fn snapshot(
    provider: &dyn LockProvider,
    options: &DashboardOptions,
    page: &PageQuery,
) -> Result<Snapshot, Unreadable> {
    let inspector = inspector(provider)?;
    let store_time = inspector.store_time().await?;
    let mut query = LockQuery::all().limit(options.page_size);
    if !page.prefix.is_empty() {
        query = query.prefix(page.prefix.clone());
    }
    if !page.after.is_empty() {
        query = query.after(page.after.clone());
    }
    let locks = inspector.list_locks(&query).await?;
    let next_page = (locks.len() == options.page_size)
        .then(|| locks.last().map(|lock| lock.name.clone()))
        .flatten();
    let mut elections = Vec::new();
    for name in &options.elections {
        elections.push((name.clone(), inspector.lock_record(name).await?));
    }
    let runs = match provider.run_log() {
        None => None,
        Some(log) => {
            let mut names: Vec<String> = locks.iter().map(|lock| lock.name.clone()).collect();
            // Runs under a lock the store has no record of (deleted, or never written by
            // this library): those among the newest runs of the store that fall in this
            // page's names, so each shows on one page.
            let on_page = |name: &str| {
                query.matches(name)
                    && next_page.as_deref().is_none_or(|last| name <= last)
                    && !locks.iter().any(|lock| lock.name == name)
            };
            let newest = log.runs(&RunQuery::all().limit(options.page_size)).await?;
            let mut unlisted: Vec<String> = newest
                .into_iter()
                .map(|run| run.lock)
                .filter(|name| on_page(name))
                .collect();
            unlisted.sort_unstable();
            unlisted.dedup();
            names.extend(unlisted);
            let limit = options.runs_read_per_lock();
            let reads: Vec<_> = names
                .iter()
                .map(|name| latest_runs(log, name, limit))
                .collect();
            let read = stream::iter(reads)
                .buffered(PARALLEL_READS)
                .try_collect::<BTreeMap<_, _>>()
                .await?;
            Some(read)
        }
    };
    Ok(Snapshot {
        store_time,
        timeline: options.timeline,
        timeline_runs: options.timeline_runs,
        locks,
        next_page,
        elections,
        runs,
    })
}

/// `lock`'s latest `limit` runs, asked of the store with the lock and the limit.
async fn latest_runs(
    log: &dyn RunLog,
    lock: &str,
    limit: usize,
) -> Result<(String, LockRuns), Error> {
    // One more than shown: whether the lock has older runs.
    let mut runs = log.runs(&RunQuery::lock(lock).limit(limit + 1)).await?;
    let more = runs.len() > limit;
    runs.truncate(limit);
    Ok((lock.to_owned(), LockRuns { runs, more }))
}

/// One lock's runs, a page at a time.
#[derive(Debug)]
pub(crate) struct History {
    pub(crate) store_time: SystemTime,
    pub(crate) name: String,
    pub(crate) lock: Option<LockRecord>,
    /// Newest first, at most [`HISTORY_PAGE`], older than `before`.
    pub(crate) runs: Vec<RunRecord>,
    /// Whether this page follows another (it was asked with a cursor).
    pub(crate) paged: bool,
    /// Where the next page starts, if there are older runs.
    pub(crate) older: Option<RunCursor>,
}

/// `name`'s runs older than the query's `before` (the newest without one).
pub(crate) async fn history(
    provider: &dyn LockProvider,
    name: &str,
    before: Option<&str>,
) -> Result<History, Unreadable> {
    let before = cursor(before)?;
    let (inspector, log) = (inspector(provider)?, run_log(provider)?);
    let store_time = inspector.store_time().await?;
    let lock = inspector.lock_record(name).await?;
    let paged = before.is_some();
    let mut query = RunQuery::lock(name).limit(HISTORY_PAGE + 1);
    if let Some(before) = before {
        query = query.before(before);
    }
    let mut runs = log.runs(&query).await?;
    let older = (runs.len() > HISTORY_PAGE)
        .then(|| runs.get(HISTORY_PAGE - 1).map(RunRecord::cursor))
        .flatten();
    runs.truncate(HISTORY_PAGE);
    Ok(History {
        store_time,
        name: name.to_owned(),
        lock,
        runs,
        paged,
        older,
    })
}

/// One run, whole.
#[derive(Debug)]
pub(crate) struct OneRun {
    pub(crate) store_time: SystemTime,
    pub(crate) name: String,
    pub(crate) lock: Option<LockRecord>,
    /// `None` when the store no longer keeps it.
    pub(crate) run: Option<RunRecord>,
}

/// The run at `at` (a cursor, which names the lock): the first record of its lock at or
/// older than it, if it is that one.
pub(crate) async fn one_run(provider: &dyn LockProvider, at: &str) -> Result<OneRun, Unreadable> {
    let at = cursor(Some(at))?.ok_or_else(|| {
        Unreadable::BadCursor(Error::invalid_config("run", "no run cursor given"))
    })?;
    let (inspector, log) = (inspector(provider)?, run_log(provider)?);
    let store_time = inspector.store_time().await?;
    let lock = inspector.lock_record(&at.lock).await?;
    let mut query = RunQuery::lock(at.lock.clone()).limit(1);
    if let Some(after) = just_after(&at) {
        query = query.before(after);
    }
    let run = log
        .runs(&query)
        .await?
        .into_iter()
        .find(|run| run.cursor() == at);
    Ok(OneRun {
        store_time,
        name: at.lock,
        lock,
        run,
    })
}

/// A cursor of the same lock just newer than `at`, so that the lock's runs "before it" start
/// at `at` itself; `None` when `at` is the newest there can be.
fn just_after(at: &RunCursor) -> Option<RunCursor> {
    let (lock, started_at) = (at.lock.clone(), at.started_at);
    if let Some(attempt) = at.attempt.checked_add(1) {
        return Some(RunCursor::new(started_at, at.fencing_token, attempt, lock));
    }
    if let Some(token) = at.fencing_token.checked_add(1) {
        return Some(RunCursor::new(started_at, token, 0, lock));
    }
    let later = started_at.checked_add(Duration::from_nanos(1))?;
    Some(RunCursor::new(later, 0, 0, lock))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn just_after_is_the_next_cursor_of_the_lock() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(5);
        for (token, attempt) in [(7, 1), (7, u32::MAX), (u64::MAX, u32::MAX)] {
            let cursor = RunCursor::new(at, token, attempt, "l");
            let next = just_after(&cursor).unwrap();
            assert!(next > cursor && next.lock == "l");
            for between in [(7, 2), (8, 0)] {
                let between = RunCursor::new(at, between.0, between.1, "l");
                assert!(!(between > cursor && between < next), "{between:?}");
            }
        }
    }
}
