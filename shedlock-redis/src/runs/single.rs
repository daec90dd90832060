//! Run records on the one server of a [`RedisLockProvider`].

use std::time::{Duration, UNIX_EPOCH};

use shedlock_core::{Error, Operation, RunEnd, RunLog, RunQuery, RunRecord, RunStart, async_trait};

use super::by_pages;
use crate::RedisLockProvider;
use crate::error::store_error;
use crate::time::system_time;

#[async_trait]
impl RunLog for RedisLockProvider {
    async fn run_started(&self, start: &RunStart) -> Result<RunRecord, Error> {
        let entry = self
            .node
            .run_started(&self.settings.runs, start)
            .await
            .map_err(|e| store_error(Operation::Runs, &start.lock, e))?;
        entry.record(self.server())?.ok_or_else(|| {
            Error::store(
                Operation::Runs,
                &start.lock,
                "the start script replied no record",
            )
        })
    }

    async fn run_finished(&self, start: &RunStart, end: &RunEnd) -> Result<(), Error> {
        self.node
            .run_finished(&self.settings.runs, start, end)
            .await
            .map_err(|e| store_error(Operation::Runs, &start.lock, e))
    }

    async fn run_alive(&self, start: &RunStart, lease: Duration) -> Result<bool, Error> {
        self.node
            .run_alive(&self.settings.runs, start, lease)
            .await
            .map_err(|e| store_error(Operation::Runs, &start.lock, e))
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        by_pages(query, |page| self.page(page)).await
    }
}

impl RedisLockProvider {
    /// One page of `query` (which has a limit), read by one script; on a cluster, a page of
    /// every lock is read from each lock with runs (one script each) and merged.
    async fn page(&self, query: RunQuery) -> Result<Vec<RunRecord>, Error> {
        if query.lock.is_none() && self.settings.runs.is_cluster() {
            return self.page_of_every_lock(query).await;
        }
        let query = &query;
        let lock_name = query.lock.as_deref().unwrap_or("*");
        let entries = self
            .node
            .runs(&self.settings.runs, query, query.limit)
            .await
            .map_err(|e| store_error(Operation::Runs, lock_name, e))?;
        let mut records = Vec::with_capacity(entries.len());
        for entry in entries {
            records.extend(entry.record(self.server())?);
        }
        if self.settings.runs.is_cluster() {
            // No write sweeps other locks on a cluster: a record past the retention is no
            // longer listed (it goes at its lock's next write, or with its keys, which expire
            // a retention after that write), unless it still runs under a live heartbeat. The
            // oldest are last, so a page cut short ends the history, as it should.
            let now = self
                .node
                .time()
                .await
                .map_err(|e| store_error(Operation::Runs, lock_name, e))?;
            let now = system_time(now);
            let oldest = now
                .checked_sub(Duration::from_millis(self.settings.runs.retention_ms))
                .unwrap_or(UNIX_EPOCH);
            records.retain(|record| record.started_at >= oldest || record.is_alive(now));
        }
        // The store's page already; `apply` only checks it.
        Ok(query.apply(records))
    }

    /// On a cluster, where no index spans the locks: the locks with runs (their `started`
    /// keys on every master), the page of each, merged newest first as the index orders runs
    /// (start, then token and attempt, then lock) and cut to the limit.
    async fn page_of_every_lock(&self, query: RunQuery) -> Result<Vec<RunRecord>, Error> {
        let runs = &self.settings.runs;
        let keys = self
            .node
            .keys(&runs.started_pattern())
            .await
            .map_err(|e| store_error(Operation::Runs, "*", e))?;
        let mut records = Vec::new();
        for lock in keys.iter().filter_map(|key| runs.lock_of_started(key)) {
            let mut of_lock = query.clone();
            of_lock.lock = Some(lock.to_owned());
            records.extend(Box::pin(self.page(of_lock)).await?);
        }
        records.sort_by(|a, b| {
            (b.started_at, b.fencing_token, b.attempt, &b.lock).cmp(&(
                a.started_at,
                a.fencing_token,
                a.attempt,
                &a.lock,
            ))
        });
        if let Some(limit) = query.limit {
            records.truncate(limit);
        }
        Ok(records)
    }
}
