//! One view of a lock across stores, and the inspection interface every store offers: what
//! tools (the `shedlock` command, a dashboard) read and do, whatever the store.

use std::fmt;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use crate::Error;

/// A lock as its store records it, read at one instant of the store's clock.
///
/// `held` is decided by the store's clock at the moment of reading (`lock_until > read_at`).
/// [`Display`](fmt::Display) prints one line for a person:
/// `nightly: held by web-1:4121:a83e until 2025-06-01T12:00:00.000Z (token 7)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockRecord {
    /// The lock's name.
    pub name: String,
    /// Who holds or last held the lock.
    pub holder: String,
    /// When the current or last lease was granted (store clock).
    pub locked_at: SystemTime,
    /// When the current or last lease ends (store clock).
    pub lock_until: SystemTime,
    /// The token of the last acquisition (0 where the store has none, e.g. a row Java
    /// ShedLock wrote before the table had a token column).
    pub fencing_token: u64,
    /// Whether the lease was still running when the record was read (store clock).
    pub held: bool,
    /// The store's clock when the record was read: the instant `held` was decided at.
    pub read_at: SystemTime,
}

impl LockRecord {
    /// A record read at `read_at`; `held` is `lock_until > read_at`. Called by providers.
    pub fn new(
        name: impl Into<String>,
        holder: impl Into<String>,
        locked_at: SystemTime,
        lock_until: SystemTime,
        fencing_token: u64,
        read_at: SystemTime,
    ) -> Self {
        LockRecord {
            name: name.into(),
            holder: holder.into(),
            locked_at,
            lock_until,
            fencing_token,
            held: lock_until > read_at,
            read_at,
        }
    }

    /// How long the lease still runs, on the store's clock: `lock_until - read_at`, zero for
    /// a lock that is free.
    pub fn remaining(&self) -> Duration {
        if !self.held {
            return Duration::ZERO;
        }
        self.lock_until
            .duration_since(self.read_at)
            .unwrap_or(Duration::ZERO)
    }
}

impl fmt::Display for LockRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.held { "held" } else { "last held" };
        write!(
            f,
            "{}: {state} by {} until {} (token {})",
            self.name,
            self.holder,
            humantime::format_rfc3339_millis(self.lock_until),
            self.fencing_token
        )
    }
}

/// Which locks [`LockInspector::list_locks`] returns: by name, in name order, a page at a
/// time.
///
/// ```
/// use shedlock_core::LockQuery;
///
/// let first = LockQuery::all().prefix("billing-").limit(100);
/// // The next page starts after the last name of this one.
/// let next = first.clone().after("billing-0099");
/// # let _ = next;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockQuery {
    /// Only names starting with this.
    pub prefix: Option<String>,
    /// Only names after this one (byte order), for the next page.
    pub after: Option<String>,
    /// At most this many records; `None`: all.
    pub limit: Option<usize>,
}

impl LockQuery {
    /// Every lock.
    pub fn all() -> Self {
        LockQuery::default()
    }

    /// Only names starting with `prefix`.
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = Some(prefix.into());
        self
    }

    /// Only names after `name` (the last of the previous page).
    pub fn after(mut self, name: impl Into<String>) -> Self {
        self.after = Some(name.into());
        self
    }

    /// At most `limit` records.
    pub fn limit(mut self, limit: usize) -> Self {
        self.limit = Some(limit);
        self
    }

    /// Whether a lock of this name belongs to the query's pages (prefix and `after`; the
    /// limit is the caller's to apply). For stores that filter after reading.
    pub fn matches(&self, name: &str) -> bool {
        self.prefix.as_deref().is_none_or(|p| name.starts_with(p))
            && self.after.as_deref().is_none_or(|after| name > after)
    }

    /// `records` filtered, sorted by name and cut to the limit: for stores that read every
    /// record and filter afterwards.
    pub fn apply(&self, mut records: Vec<LockRecord>) -> Vec<LockRecord> {
        records.retain(|record| self.matches(&record.name));
        records.sort_unstable_by(|a, b| a.name.cmp(&b.name));
        if let Some(limit) = self.limit {
            records.truncate(limit);
        }
        records
    }
}

/// Reading and clearing locks in a store, for tools: one interface, so that the `shedlock`
/// command and a dashboard work on every store.
///
/// Every provider of this workspace implements it next to [`LockProvider`](crate::LockProvider);
/// the conformance kit (`shedlock_conformance::inspection`) checks it. Times are the store's.
#[async_trait]
pub trait LockInspector: Send + Sync + fmt::Debug + 'static {
    /// The record of one lock, if the store has one.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Read`) when the store cannot be read, or holds a record
    /// that cannot be read (a time or token that is not one).
    async fn lock_record(&self, name: &str) -> Result<Option<LockRecord>, Error>;

    /// The records `query` asks for, in name order.
    ///
    /// # Errors
    /// As [`lock_record`](Self::lock_record).
    async fn list_locks(&self, query: &LockQuery) -> Result<Vec<LockRecord>, Error>;

    /// The store's clock now: the clock every lease is decided by.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Read`) when the store cannot be read.
    async fn store_time(&self) -> Result<SystemTime, Error>;

    /// Ends the live lease `record` shows now, as its holder's release would (without its
    /// `lock_at_least_for`): for operators, who release what they inspected. The lease is the
    /// record's name, holder and fencing token; its times are not looked at. Returns whether
    /// that lease was live and is now ended; a lease taken since the record was read has
    /// another token and is left alone.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Release`) when the store fails.
    async fn release_lock(&self, record: &LockRecord) -> Result<bool, Error>;
}

#[async_trait]
impl<I: LockInspector + ?Sized> LockInspector for std::sync::Arc<I> {
    async fn lock_record(&self, name: &str) -> Result<Option<LockRecord>, Error> {
        (**self).lock_record(name).await
    }
    async fn list_locks(&self, query: &LockQuery) -> Result<Vec<LockRecord>, Error> {
        (**self).list_locks(query).await
    }
    async fn store_time(&self) -> Result<SystemTime, Error> {
        (**self).store_time().await
    }
    async fn release_lock(&self, record: &LockRecord) -> Result<bool, Error> {
        (**self).release_lock(record).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(name: &str) -> LockRecord {
        let t = SystemTime::UNIX_EPOCH;
        LockRecord::new(name, "h", t, t, 1, t)
    }

    #[test]
    fn queries_filter_sort_and_cut() {
        let records = ["b-2", "a-1", "b-1", "b-3", "c-1"].map(record).to_vec();
        let names = |q: &LockQuery| {
            q.apply(records.clone())
                .into_iter()
                .map(|r| r.name)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            names(&LockQuery::all()),
            ["a-1", "b-1", "b-2", "b-3", "c-1"]
        );
        let page = LockQuery::all().prefix("b-").limit(2);
        assert_eq!(names(&page), ["b-1", "b-2"]);
        assert_eq!(names(&page.clone().after("b-2")), ["b-3"]);
    }

    #[test]
    fn held_is_decided_at_read_time() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let held = LockRecord::new("x", "h", t, t + Duration::from_secs(5), 3, t);
        assert!(held.held);
        assert_eq!(held.remaining(), Duration::from_secs(5));
        let free = LockRecord::new("x", "h", t, t, 3, t);
        assert!(!free.held);
        assert_eq!(free.remaining(), Duration::ZERO);
        assert_eq!(
            held.to_string(),
            "x: held by h until 1970-01-01T00:01:45.000Z (token 3)"
        );
    }
}
