//! Run records on the masters of a [`RedLockProvider`], by majority.
//!
//! Every master keeps its own copy of every record, written by the same scripts as on one
//! server, on its own clock, "the first end stays" on each. A write counts when a majority of
//! the masters accepted it. A read asks every master and merges what they answered:
//!
//! - a run is listed when a majority of the masters hold its record (one written to a
//!   minority only, by a write that failed, is not);
//! - its end is the one (outcome and error) that a majority holds; when no end has a
//!   majority (its end reached only a minority, or two ends raced to different masters) it
//!   reads as running, with no end time;
//! - its times are the masters' `N − quorum + 1`-th earliest (the median of three): a time
//!   that at least one master of every majority had reached, so a run never reads as
//!   started before the lease the majority granted it;
//! - a running record's heartbeat (`alive_until`) is the same agreed time of the masters'
//!   heartbeats: a renewal counts when a majority renewed, and then a majority holds the new
//!   time, so the merged time is the new one; a renewal on a minority leaves it where it was.
//!
//! A page is read from every master (the same script as on one server, newest first by that
//! master's times, [`FETCH_SLACK`] more than the page) and merged. A master that answered a
//! full page may hold more runs older than its last one, so the merged page keeps only what is
//! newer than the last run of every full answer, and reads again with twice as many when that
//! leaves it short: a run held by a majority is not skipped because a minority held others.
//!
//! A record that a master holds corrupt fails the read, naming the master and the key.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use futures_util::future::join_all;
use shedlock_core::{
    Error, Operation, RunCursor, RunEnd, RunLog, RunOutcome, RunQuery, RunRecord, RunStart,
    async_trait,
};

use super::by_pages;
use crate::RedLockProvider;
use crate::error::{QuorumError, ServerError};

/// How many more records than a page each master is asked for.
const FETCH_SLACK: usize = 16;

impl RedLockProvider {
    /// What each master answered, or `Err` when fewer than a majority did.
    fn answers<T>(
        &self,
        lock: &str,
        replies: Vec<Result<T, ServerError>>,
    ) -> Result<Vec<T>, Error> {
        let (mut answers, mut failures) = (Vec::new(), Vec::new());
        for reply in replies {
            match reply {
                Ok(answer) => answers.push(answer),
                Err(failure) => failures.push(failure),
            }
        }
        if answers.len() < self.quorum() {
            return Err(Error::store(
                Operation::Runs,
                lock,
                QuorumError {
                    masters: self.nodes.len(),
                    quorum: self.quorum(),
                    failures,
                },
            ));
        }
        for failure in &failures {
            tracing::debug!(lock, error = %failure, "RedLock master failed; a majority recorded the run");
        }
        Ok(answers)
    }
}

#[async_trait]
impl RunLog for RedLockProvider {
    async fn run_started(&self, start: &RunStart) -> Result<RunRecord, Error> {
        let keys = &self.settings.runs;
        let replies = join_all(self.nodes.iter().map(|node| async move {
            let entry = node.run_started(keys, start).await?;
            Ok((node.server(), entry))
        }))
        .await;
        let mut versions = Vec::new();
        for (server, entry) in self.answers(&start.lock, replies)? {
            versions.extend(entry.record(server)?);
        }
        let merged = merge(vec![versions], self.nodes.len(), self.quorum());
        merged.into_iter().next().ok_or_else(|| {
            Error::store(
                Operation::Runs,
                &start.lock,
                "fewer than a majority of the masters replied the record",
            )
        })
    }

    async fn run_finished(&self, start: &RunStart, end: &RunEnd) -> Result<(), Error> {
        let keys = &self.settings.runs;
        let replies = join_all(
            self.nodes
                .iter()
                .map(|node| node.run_finished(keys, start, end)),
        )
        .await;
        self.answers(&start.lock, replies).map(drop)
    }

    async fn run_alive(&self, start: &RunStart, lease: Duration) -> Result<bool, Error> {
        let keys = &self.settings.runs;
        let replies = join_all(
            self.nodes
                .iter()
                .map(|node| node.run_alive(keys, start, lease)),
        )
        .await;
        let renewed = self.answers(&start.lock, replies)?;
        Ok(renewed.into_iter().filter(|&renewed| renewed).count() >= self.quorum())
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        by_pages(query, |page| self.page(page)).await
    }
}

impl RedLockProvider {
    /// One page of `query`: read from every master and merged.
    async fn page(&self, query: RunQuery) -> Result<Vec<RunRecord>, Error> {
        let query = &query;
        let keys = &self.settings.runs;
        let lock_name = query.lock.as_deref().unwrap_or("*");
        let mut fetch = query.limit.map(|limit| limit.saturating_add(FETCH_SLACK));
        loop {
            let replies = join_all(self.nodes.iter().map(|node| async move {
                let entries = node.runs(keys, query, fetch).await?;
                Ok((node.server(), entries))
            }))
            .await;
            let mut masters = Vec::new();
            // The oldest run of each master that answered a full page: older ones it holds
            // may be missing from its answer.
            let mut horizon: Option<RunCursor> = None;
            for (server, entries) in self.answers(lock_name, replies)? {
                let full = fetch.is_some_and(|fetch| entries.len() >= fetch);
                let mut records = Vec::with_capacity(entries.len());
                for entry in entries {
                    records.extend(entry.record(server)?);
                }
                if full && let Some(last) = records.iter().map(RunRecord::cursor).min() {
                    horizon = horizon.max(Some(last));
                }
                masters.push(records);
            }
            let mut page = query.apply(merge(masters, self.nodes.len(), self.quorum()));
            let Some(horizon) = horizon else {
                // Every master answered all it holds.
                return Ok(page);
            };
            page.retain(|record| record.cursor() > horizon);
            if query.limit.is_some_and(|limit| page.len() >= limit) {
                return Ok(page);
            }
            fetch = fetch.map(|fetch| fetch.saturating_mul(2));
        }
    }
}

/// The records a majority of `masters` (of `total`) hold, merged as the module docs say.
fn merge(masters: Vec<Vec<RunRecord>>, total: usize, quorum: usize) -> Vec<RunRecord> {
    let mut runs: BTreeMap<(String, u64, u32), Vec<RunRecord>> = BTreeMap::new();
    for record in masters.into_iter().flatten() {
        let key = (record.lock.clone(), record.fencing_token, record.attempt);
        runs.entry(key).or_default().push(record);
    }
    // The (total − quorum + 1)-th earliest of the times (of at least `quorum` masters).
    let agreed = |mut times: Vec<SystemTime>| {
        times.sort_unstable();
        let index = (total - quorum).min(times.len().saturating_sub(1));
        times.get(index).copied()
    };
    runs.into_values()
        .filter(|versions| versions.len() >= quorum)
        .map(|versions| {
            let mut record = versions[0].clone();
            let started = agreed(versions.iter().map(|v| v.started_at).collect());
            record.started_at = started.unwrap_or(record.started_at);
            let end = versions
                .iter()
                .filter(|v| v.outcome.is_final())
                .map(|v| (v.outcome, &v.error))
                .find(|&end| {
                    let holding = versions.iter().filter(|v| (v.outcome, &v.error) == end);
                    holding.count() >= quorum
                });
            let alive = versions
                .iter()
                .filter(|v| v.outcome == RunOutcome::Running)
                .filter_map(|v| v.alive_until)
                .collect();
            match end {
                Some((outcome, error)) => {
                    let ended = versions
                        .iter()
                        .filter(|v| (v.outcome, &v.error) == (outcome, error));
                    record.finished_at = agreed(ended.filter_map(|v| v.finished_at).collect());
                    record.outcome = outcome;
                    record.error = error.clone();
                    record.alive_until = None;
                }
                None => {
                    record.outcome = RunOutcome::Running;
                    record.finished_at = None;
                    record.error = None;
                    record.alive_until = agreed(alive);
                }
            }
            record
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;

    fn version(token: u64, started_ms: u64, end: Option<(RunEnd, u64)>) -> RunRecord {
        let at = |ms| UNIX_EPOCH + Duration::from_millis(ms);
        let record = RunRecord::started(&RunStart::new("l", "j", None, "h", token), at(started_ms));
        match end {
            Some((end, ms)) => record.finished(&end, at(ms)),
            None => record,
        }
    }

    #[test]
    fn a_heartbeat_moves_when_a_majority_renewed_it() {
        let at = |ms| UNIX_EPOCH + Duration::from_millis(ms);
        let alive = |until| {
            let mut record = version(4, 10, None);
            record.alive_until = Some(at(until));
            record
        };
        // Renewed to 900 on two masters of three: the run goes on until (about) then.
        let renewed = vec![vec![alive(500)], vec![alive(900)], vec![alive(905)]];
        let [run] = &merge(renewed, 3, 2)[..] else {
            panic!("one run")
        };
        assert_eq!(run.alive_until, Some(at(900)));
        // Renewed on one master only (the renewal returned false): the old heartbeat stays.
        let minority = vec![vec![alive(500)], vec![alive(502)], vec![alive(905)]];
        let [run] = &merge(minority, 3, 2)[..] else {
            panic!("one run")
        };
        assert_eq!(run.alive_until, Some(at(502)));
        // Ended on a majority: no heartbeat.
        let ended = version(4, 10, Some((RunEnd::succeeded(), 20)));
        let [run] = &merge(
            vec![vec![ended.clone()], vec![ended], vec![alive(905)]],
            3,
            2,
        )[..] else {
            panic!("one run")
        };
        assert_eq!(
            (run.outcome, run.alive_until),
            (RunOutcome::Succeeded, None)
        );
    }

    #[test]
    fn a_run_needs_a_majority_and_its_end_too() {
        let failed = || RunEnd::with_error(RunOutcome::Failed, "boom");
        let masters = vec![
            vec![version(1, 10, Some((failed(), 20))), version(2, 30, None)],
            vec![version(1, 12, Some((failed(), 25)))],
            vec![version(1, 11, Some((RunEnd::succeeded(), 21)))],
        ];
        let merged = merge(masters, 3, 2);
        assert_eq!(merged.len(), 1, "token 2 is on one master only: {merged:?}");
        let run = &merged[0];
        assert_eq!(
            (run.outcome, run.error.as_deref()),
            (RunOutcome::Failed, Some("boom"))
        );
        assert_eq!(run.started_at, UNIX_EPOCH + Duration::from_millis(11));
        assert_eq!(
            run.finished_at,
            Some(UNIX_EPOCH + Duration::from_millis(25))
        );

        let split = vec![
            vec![version(3, 10, Some((failed(), 20)))],
            vec![version(3, 10, Some((RunEnd::succeeded(), 20)))],
            vec![version(3, 10, None)],
        ];
        let [run] = &merge(split, 3, 2)[..] else {
            panic!("one run")
        };
        assert_eq!((run.outcome, run.finished_at), (RunOutcome::Running, None));
    }
}
