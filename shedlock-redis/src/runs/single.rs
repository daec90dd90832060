//! Run records on the one server of a [`RedisLockProvider`].

use std::time::Duration;

use shedlock_core::{Error, Operation, RunEnd, RunLog, RunQuery, RunRecord, RunStart, async_trait};

use super::by_pages;
use crate::RedisLockProvider;
use crate::error::store_error;

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
    /// One page of `query` (which has a limit), read by one script.
    async fn page(&self, query: RunQuery) -> Result<Vec<RunRecord>, Error> {
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
        // The store's page already; `apply` only checks it.
        Ok(query.apply(records))
    }
}
