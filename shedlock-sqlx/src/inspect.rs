//! The one view of a stored lock (`LockInspector`) on a SQL table: what the `shedlock` command
//! and the dashboard read and release.

use std::time::{Duration, SystemTime};

use shedlock_core::{Error, LockInspector, LockQuery, LockRecord, Operation, async_trait};

use crate::provider::retry::run;
use crate::{Dialect, Lease, SqlLockProvider, record, store_error, system_time, token_param};

/// Reads the whole table and filters and pages in this process (a lock table holds one row
/// per lock name: thousands at most).
#[async_trait]
impl<D: Dialect> LockInspector for SqlLockProvider<D> {
    async fn lock_record(&self, name: &str) -> Result<Option<LockRecord>, Error> {
        let rows = D::read_rows(&self.pool, &self.sql, Some(name))
            .await
            .map_err(|e| store_error(Operation::Read, name, &self.table, e))?;
        Ok(rows.into_iter().next().map(record))
    }

    async fn list_locks(&self, query: &LockQuery) -> Result<Vec<LockRecord>, Error> {
        let rows = D::read_rows(&self.pool, &self.sql, None)
            .await
            .map_err(|e| store_error(Operation::Read, "*", &self.table, e))?;
        Ok(query.apply(rows.into_iter().map(record).collect()))
    }

    async fn store_time(&self) -> Result<SystemTime, Error> {
        D::database_time(&self.pool)
            .await
            .map(system_time)
            .map_err(|e| store_error(Operation::Read, "*", &self.table, e))
    }

    /// Matches the holder exactly as the row holds it, whatever it is (a holder another program
    /// wrote may be one no provider of ours would accept).
    async fn release_lock(&self, record: &LockRecord) -> Result<bool, Error> {
        let (name, holder, fencing_token) = (&*record.name, &*record.holder, record.fencing_token);
        let Some(token) = token_param(fencing_token) else {
            return Ok(false);
        };
        let args = Lease {
            name,
            holder,
            token,
            duration: Duration::ZERO,
        };
        let (sql, state) = (&*self.sql, &*self.state);
        run!(self, |c| D::release(c, sql, state, args))
            .map_err(|e| self.operation_error(Operation::Release, name, e))
    }
}
