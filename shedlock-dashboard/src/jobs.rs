//! The jobs view's reads: the fleet's jobs from the store's board (read once per page), and
//! for each job of the page its lock's latest run and its failures over the last day, each
//! asked of the store with the lock and a limit.

use std::time::{Duration, SystemTime};

use futures_util::{StreamExt, TryStreamExt, stream};
use shedlock_core::{Error, Fleet, FleetJob, LockProvider, RunOutcome, RunQuery, RunRecord};

use crate::DashboardOptions;
use crate::read::PageQuery;

/// Runs of the last day read per job to count its failures: beyond, the count says "at least".
pub(crate) const FAILURES_READ: usize = 200;
/// How far back failures are counted.
pub(crate) const FAILURES_SPAN: Duration = Duration::from_secs(24 * 3600);
/// Jobs whose runs are read at the same time.
const PARALLEL_READS: usize = 8;

/// One job of the page, with what its lock's run records say.
#[derive(Debug)]
pub(crate) struct JobRow {
    pub(crate) job: FleetJob,
    /// The next fire time of its cron schedule after its newest carrier's heartbeat.
    pub(crate) next_fire: Option<SystemTime>,
    /// Its lock's latest run; `None` without runs, a lock, or run records.
    pub(crate) last_run: Option<RunRecord>,
    /// Its failures over the last day, and whether the read was cut at [`FAILURES_READ`] (so
    /// there may be more); `None` without a lock or run records.
    pub(crate) failures: Option<(usize, bool)>,
}

/// The jobs view: a page of the fleet's jobs by name.
#[derive(Debug)]
pub(crate) struct JobsPage {
    pub(crate) store_time: SystemTime,
    /// `None`: the store keeps no board.
    pub(crate) jobs: Option<Vec<JobRow>>,
    /// Jobs on the board matching the filter (all pages).
    pub(crate) matching: usize,
    /// The last name of a full page, when more jobs follow it.
    pub(crate) next_page: Option<String>,
    /// Whether the store keeps run records.
    pub(crate) runs_kept: bool,
}

/// A page of jobs: the board read once, the page cut from it by name (`prefix`, `after`,
/// [`DashboardOptions::page_size`]), and two bounded run reads per job of the page.
pub(crate) async fn jobs_page(
    provider: &dyn LockProvider,
    fleet: Option<&Fleet>,
    options: &DashboardOptions,
    query: &PageQuery,
) -> Result<JobsPage, Error> {
    let store_time = match provider.inspector() {
        Some(inspector) => inspector.store_time().await?,
        None => SystemTime::now(),
    };
    let log = provider.run_log();
    let Some(fleet) = fleet else {
        return Ok(JobsPage {
            store_time,
            jobs: None,
            matching: 0,
            next_page: None,
            runs_kept: log.is_some(),
        });
    };
    let mut matching = 0;
    let mut page = Vec::new();
    let mut more = false;
    for job in fleet.jobs().await? {
        if !job.name.starts_with(&query.prefix) {
            continue;
        }
        matching += 1;
        if !query.after.is_empty() && job.name.as_str() <= query.after.as_str() {
            continue;
        }
        if page.len() < options.page_size {
            page.push(job);
        } else {
            more = true;
        }
    }
    let next_page = more
        .then(|| page.last().map(|job| job.name.clone()))
        .flatten();
    let since = store_time.checked_sub(FAILURES_SPAN).unwrap_or(store_time);
    let reads: Vec<_> = page
        .into_iter()
        .map(|job| job_row(log, job, since))
        .collect();
    let jobs = stream::iter(reads)
        .buffered(PARALLEL_READS)
        .try_collect()
        .await?;
    Ok(JobsPage {
        store_time,
        jobs: Some(jobs),
        matching,
        next_page,
        runs_kept: log.is_some(),
    })
}

async fn job_row(
    log: Option<&dyn shedlock_core::RunLog>,
    job: FleetJob,
    since: SystemTime,
) -> Result<JobRow, Error> {
    let newest_beat = job.carriers.iter().map(|carrier| carrier.seen_at).max();
    let definition = job.definition();
    let next_fire = definition
        .zip(newest_beat)
        .and_then(|(definition, after)| definition.next_fire(after));
    let lock = definition.and_then(|definition| definition.lock.clone());
    let (mut last_run, mut failures) = (None, None);
    if let (Some(log), Some(lock)) = (log, lock) {
        last_run = log
            .runs(&RunQuery::lock(lock.clone()).limit(1))
            .await?
            .into_iter()
            .next();
        let day = log
            .runs(&RunQuery::lock(lock).since(since).limit(FAILURES_READ))
            .await?;
        let failed = day
            .iter()
            .filter(|run| matches!(run.outcome, RunOutcome::Failed | RunOutcome::Interrupted))
            .count();
        failures = Some((failed, day.len() >= FAILURES_READ));
    }
    Ok(JobRow {
        job,
        next_fire,
        last_run,
        failures,
    })
}
