//! What one page shows, read from the store at one moment.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use shedlock_core::{Error, LockProvider, LockQuery, LockRecord, RunOutcome, RunQuery, RunRecord};

use crate::DashboardOptions;

/// Most run records read for one page (the timeline's hour and the per-job lists).
const MAX_RUNS: usize = 5000;

/// Which page of locks, as the page's query string says.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub(crate) struct PageQuery {
    /// Only names starting with this.
    #[serde(default)]
    pub(crate) prefix: String,
    /// Names after this one (the next page).
    #[serde(default)]
    pub(crate) after: String,
}

/// Everything one page shows.
#[derive(Debug)]
pub(crate) struct Snapshot {
    pub(crate) store_time: SystemTime,
    /// How far back the timeline reaches.
    pub(crate) timeline: Duration,
    pub(crate) locks: Vec<LockRecord>,
    /// The last name of a full page: there may be more after it.
    pub(crate) next_page: Option<String>,
    pub(crate) elections: Vec<(String, Option<LockRecord>)>,
    /// Runs of the last hour (or the latest few per job), per job, newest first; `None` when the
    /// store keeps no run records.
    pub(crate) runs: Option<BTreeMap<String, Vec<RunRecord>>>,
    /// For each lock with a run still marked running: its live token, if held.
    live: BTreeMap<String, Option<u64>>,
}

impl Snapshot {
    /// The run's outcome as the page shows it: a run still marked running whose lease is gone
    /// is shown interrupted.
    pub(crate) fn outcome(&self, run: &RunRecord) -> RunOutcome {
        let live = self.live.get(&run.lock).copied().flatten();
        if run.is_interrupted(live.unwrap_or(0), live.is_some()) {
            RunOutcome::Interrupted
        } else {
            run.outcome
        }
    }
}

/// Why a page could not be read.
#[derive(Debug)]
pub(crate) enum Unreadable {
    /// The provider offers no inspection.
    NoInspector,
    /// The store failed.
    Store(Error),
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
            Unreadable::Store(error) => error.fmt(f),
        }
    }
}

pub(crate) async fn snapshot(
    provider: &dyn LockProvider,
    options: &DashboardOptions,
    page: &PageQuery,
) -> Result<Snapshot, Unreadable> {
    let Some(inspector) = provider.inspector() else {
        return Err(Unreadable::NoInspector);
    };
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
            let since = store_time
                .checked_sub(options.timeline)
                .unwrap_or(store_time);
            let mut per_job: BTreeMap<String, Vec<RunRecord>> = BTreeMap::new();
            for run in log.runs(&RunQuery::all().limit(MAX_RUNS)).await? {
                let list = per_job.entry(run.job.clone()).or_default();
                if run.started_at >= since || list.len() < options.runs_per_job {
                    list.push(run);
                }
            }
            Some(per_job)
        }
    };
    let mut live = BTreeMap::new();
    for run in runs.iter().flat_map(|jobs| jobs.values().flatten()) {
        if run.outcome == RunOutcome::Running && !live.contains_key(&run.lock) {
            let lock = inspector.lock_record(&run.lock).await?;
            let token = lock.filter(|lock| lock.held).map(|lock| lock.fencing_token);
            live.insert(run.lock.clone(), token);
        }
    }
    Ok(Snapshot {
        store_time,
        timeline: options.timeline,
        locks,
        next_page,
        elections,
        runs,
        live,
    })
}
