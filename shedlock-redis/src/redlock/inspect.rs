//! [`LockInspector`] on RedLock: what a majority of the masters agree on.
//!
//! - A lock's record is the lease `(holder, token)` that a majority of masters hold; its
//!   `locked_at` is the earliest grant among them and its `lock_until` the earliest end less
//!   the clock-drift allowance, as [`acquire`](shedlock_core::LockProvider::acquire) grants a
//!   lease. The allowance is taken for the lease's whole length from its grant, which after an
//!   extension is longer than the holder's own: the record never ends later than the holder's
//!   lease, and a lock read as free may still be refused for that allowance.
//! - The store's clock ([`store_time`](LockInspector::store_time), a record's `read_at`) is the
//!   latest time a majority of the masters have reached: the median of three.
//! - A name whose masters hold no common lease on a majority (no key on a majority, or votes
//!   split between attempts) has no record. With so many masters failing that a majority
//!   might have agreed, reading is an error, as for the other operations.
//! - An operator's release runs the release script on every master with `lock_at_least_for`
//!   zero: each master that holds the lease `(holder, token)` live ends it at its now, and the
//!   holder's own late release or extension then finds it over everywhere.

use std::time::{Duration, SystemTime};

use futures_util::future::join_all;
use shedlock_core::{Error, LockInspector, LockQuery, LockRecord, Operation, async_trait};

use super::RedLockProvider;
use crate::error::ServerError;
use crate::inspect::{names_in, records_of};
use crate::node::StateParts;
use crate::time::system_time;

impl RedLockProvider {
    /// The latest clock (ms) a majority of the masters has reached, from the clocks of the
    /// masters that answered (at least a majority).
    fn majority_clock(&self, mut clocks: Vec<u64>) -> u64 {
        clocks.sort_unstable();
        let at = clocks.len().saturating_sub(self.algorithm.quorum);
        clocks.get(at).copied().unwrap_or_default()
    }

    /// The record a majority of `states` (one per master that answered) agrees on.
    fn agreed_record(&self, name: &str, states: &[Option<StateParts>]) -> Option<LockRecord> {
        let quorum = self.algorithm.quorum;
        let clocks = states.iter().flatten().map(|s| s.4).collect();
        let read_at = self.majority_clock(clocks);
        let leased = states.iter().flatten().find(|(holder, token, ..)| {
            let same = |s: &&StateParts| s.0 == *holder && s.1 == *token;
            states.iter().flatten().filter(same).count() >= quorum
        })?;
        let agreeing = states
            .iter()
            .flatten()
            .filter(|s| s.0 == leased.0 && s.1 == leased.1);
        let (mut locked_at, mut lock_until, mut length) = (u64::MAX, u64::MAX, 0);
        for &(_, _, granted, until, _) in agreeing {
            locked_at = locked_at.min(granted);
            lock_until = lock_until.min(until);
            length = length.max(until.saturating_sub(granted));
        }
        let drift = self.drift(Duration::from_millis(length));
        let lock_until = (system_time(lock_until).checked_sub(drift))
            .unwrap_or(SystemTime::UNIX_EPOCH)
            .max(system_time(locked_at));
        Some(LockRecord::new(
            name,
            leased.0.clone(),
            system_time(locked_at),
            lock_until,
            leased.1,
            system_time(read_at),
        ))
    }

    /// The answers of the masters that answered, or an error when too many failed to decide.
    fn answered<T>(
        &self,
        operation: Operation,
        name: &str,
        replies: Vec<Result<T, ServerError>>,
    ) -> Result<Vec<T>, Error> {
        let mut answers = Vec::with_capacity(replies.len());
        let mut failures = Vec::new();
        for reply in replies {
            match reply {
                Ok(answer) => answers.push(answer),
                Err(failure) => failures.push(failure),
            }
        }
        if !failures.is_empty() {
            self.check_quorum(operation, name, failures, 0)?;
        }
        Ok(answers)
    }
}

#[async_trait]
impl LockInspector for RedLockProvider {
    async fn lock_record(&self, name: &str) -> Result<Option<LockRecord>, Error> {
        let key = self.key(name);
        let replies = join_all(self.nodes.iter().map(|node| node.state(&key))).await;
        let (mut states, mut failures) = (Vec::new(), Vec::new());
        for reply in replies {
            match reply {
                Ok(state) => states.push(state),
                Err(failure) => failures.push(failure),
            }
        }
        if let Some(record) = self.agreed_record(name, &states) {
            return Ok(Some(record));
        }
        // No record when a majority has no key, or the states cannot make a majority even
        // with the masters that failed; an error when those could have.
        let largest_group = states
            .iter()
            .map(|state| {
                let same = |other: &&Option<StateParts>| match (state, other) {
                    (Some(a), Some(b)) => a.0 == b.0 && a.1 == b.1,
                    (None, None) => true,
                    _ => false,
                };
                states.iter().filter(same).count()
            })
            .max()
            .unwrap_or(0);
        self.check_quorum(Operation::Read, name, failures, largest_group)?;
        Ok(None)
    }

    async fn list_locks(&self, query: &LockQuery) -> Result<Vec<LockRecord>, Error> {
        let pattern = format!("{}*", self.key_prefix());
        let replies = join_all(self.nodes.iter().map(|node| node.keys(&pattern))).await;
        let keys = self.answered(Operation::Read, "*", replies)?;
        let names = names_in(keys.concat(), self.key_prefix(), query);
        records_of(self, names, query).await
    }

    async fn store_time(&self) -> Result<SystemTime, Error> {
        let replies = join_all(self.nodes.iter().map(|node| node.time())).await;
        let clocks = self.answered(Operation::Read, "*", replies)?;
        let now = self.majority_clock(clocks);
        Ok(system_time(now))
    }

    async fn release_lock(&self, record: &LockRecord) -> Result<bool, Error> {
        let (name, holder, fencing_token) = (&*record.name, &*record.holder, record.fencing_token);
        self.release_on_masters(name, holder, fencing_token, Duration::ZERO)
            .await
    }
}
