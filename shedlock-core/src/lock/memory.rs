//! A lock store in process memory, with the full semantics of a real store.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;

use crate::{
    Board, BoardCondition, BoardEntry, Clock, DEFAULT_RUN_RETENTION, DEFAULT_RUNS_PER_LOCK, Error,
    LockConfiguration, LockInspector, LockLease, LockProvider, LockQuery, LockRecord, RunEnd,
    RunLog, RunOutcome, RunQuery, RunRecord, RunStart, SystemClock, default_holder,
};

/// Run records an in-memory store keeps in all; older ones are dropped first.
const MAX_RUNS: usize = 20_000;

/// Locks kept in this process: for tests, single-instance deployments, and as the reference
/// implementation of the [`LockProvider`] contract (fencing tokens, extension, `lock_at_least_for`).
///
/// Clones share one store. Use [`with_holder`](Self::with_holder) to get providers that act as
/// different instances over the same store, and [`with_clock`](Self::with_clock) to drive time
/// from a test.
///
/// ```
/// use std::sync::Arc;
/// use std::time::{Duration, SystemTime};
/// use shedlock_core::{InMemoryLockProvider, LockConfiguration, LockProvider, ManualClock};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), shedlock_core::Error> {
/// let clock = Arc::new(ManualClock::new(SystemTime::UNIX_EPOCH));
/// let a = InMemoryLockProvider::new().with_clock(clock.clone()).with_holder("a");
/// let b = a.with_holder("b");
/// let config = LockConfiguration::new("job", Duration::from_secs(10), Duration::ZERO)?;
///
/// let lease = a.acquire(&config).await?.expect("free");
/// assert!(b.acquire(&config).await?.is_none());
/// clock.advance(Duration::from_secs(10));
/// let taken_over = b.acquire(&config).await?.expect("expired");
/// assert!(taken_over.fencing_token() > lease.fencing_token());
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct InMemoryLockProvider {
    rows: Arc<Mutex<HashMap<Arc<str>, Row>>>,
    /// Run records, oldest first, at most [`MAX_RUNS`].
    runs: Arc<Mutex<VecDeque<RunRecord>>>,
    /// The board: entries by key, and the last version written.
    board: Arc<Mutex<(BTreeMap<String, BoardEntry>, u64)>>,
    released: tokio::sync::broadcast::Sender<Arc<str>>,
    clock: Arc<dyn Clock>,
    holder: Arc<str>,
    /// What this provider keeps of its run records: `run_retention`, `runs_per_lock`.
    keeping: (Duration, u32),
}

#[derive(Debug)]
struct Row {
    lock_until: SystemTime,
    locked_at: SystemTime,
    locked_by: Arc<str>,
    fencing_token: u64,
    /// The last tick granted ([`crate::Tick::millis`]).
    last_tick: Option<i64>,
}

impl InMemoryLockProvider {
    /// An empty store on the system clock, holding as [`default_holder`].
    pub fn new() -> Self {
        InMemoryLockProvider {
            rows: Arc::default(),
            runs: Arc::default(),
            board: Arc::default(),
            released: tokio::sync::broadcast::channel(64).0,
            clock: Arc::new(SystemClock),
            holder: default_holder().into(),
            keeping: (DEFAULT_RUN_RETENTION, DEFAULT_RUNS_PER_LOCK),
        }
    }

    /// A provider over the same store that keeps run records as a store builder's
    /// `run_retention` and `runs_per_lock` say (as each end is recorded, exactly), and at most
    /// 20,000 in all.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] as [`validate_run_retention`](crate::validate_run_retention).
    pub fn keeping_runs(&self, retention: Duration, runs_per_lock: u32) -> Result<Self, Error> {
        crate::validate_run_retention(retention, runs_per_lock)?;
        Ok(InMemoryLockProvider {
            keeping: (retention, runs_per_lock),
            ..self.clone()
        })
    }

    /// A provider over the same store acting as another holder (another instance).
    pub fn with_holder(&self, holder: impl Into<String>) -> Self {
        InMemoryLockProvider {
            holder: holder.into().into(),
            ..self.clone()
        }
    }

    /// A provider over the same store reading time from `clock` (the store's clock).
    pub fn with_clock(&self, clock: Arc<dyn Clock>) -> Self {
        InMemoryLockProvider {
            clock,
            ..self.clone()
        }
    }

    fn rows(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, Row>> {
        self.rows.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn owns(&self, row: &Row, lease: &LockLease) -> bool {
        *row.locked_by == *self.holder && row.fencing_token == lease.fencing_token()
    }
}

impl Default for InMemoryLockProvider {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl LockProvider for InMemoryLockProvider {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        let now = self.clock.now();
        let mut rows = self.rows();
        let (previous_token, last_tick) = match rows.get(config.name()) {
            Some(row) if row.lock_until > now => return Ok(None),
            Some(row) if row.locked_at + config.acquired_within_window() > now => return Ok(None),
            Some(row) => (row.fencing_token, row.last_tick),
            None => (0, None),
        };
        if let Some(tick) = config.tick()
            && !tick.follows(last_tick, now)
        {
            return Ok(None);
        }
        let row = Row {
            lock_until: now + config.lock_at_most_for(),
            locked_at: now,
            locked_by: Arc::clone(&self.holder),
            fencing_token: previous_token + 1,
            last_tick: config.tick().map(|tick| tick.millis()).or(last_tick),
        };
        let lease = LockLease::new(
            config,
            Arc::clone(&self.holder),
            row.fencing_token,
            row.locked_at,
            row.lock_until,
        );
        rows.insert(lease.shared_name(), row);
        Ok(Some(lease))
    }

    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        let now = self.clock.now();
        let mut rows = self.rows();
        match rows.get_mut(lease.name()) {
            Some(row) if self.owns(row, lease) && row.lock_until > now => {
                row.lock_until = now.max(row.locked_at + lease.lock_at_least_for());
                if self.released.receiver_count() > 0 {
                    // Hints are best effort: a full channel just drops this one.
                    let _ = self.released.send(lease.shared_name());
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn extend(
        &self,
        lease: &LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<LockLease>, Error> {
        let now = self.clock.now();
        let mut rows = self.rows();
        match rows.get_mut(lease.name()) {
            Some(row) if self.owns(row, lease) && row.lock_until > now => {
                row.lock_until = now + lock_at_most_for;
                Ok(Some(lease.extended(
                    row.lock_until,
                    lock_at_most_for,
                    lock_at_least_for,
                )))
            }
            _ => Ok(None),
        }
    }

    fn holder(&self) -> &str {
        &self.holder
    }

    fn release_hints(&self) -> Option<tokio::sync::broadcast::Receiver<Arc<str>>> {
        Some(self.released.subscribe())
    }

    fn run_log(&self) -> Option<&dyn RunLog> {
        Some(self)
    }

    fn inspector(&self) -> Option<&dyn LockInspector> {
        Some(self)
    }

    fn board(&self) -> Option<&dyn Board> {
        Some(self)
    }
}

#[async_trait]
impl LockInspector for InMemoryLockProvider {
    async fn lock_record(&self, name: &str) -> Result<Option<LockRecord>, Error> {
        let now = self.clock.now();
        Ok(self.rows().get(name).map(|row| record(name, row, now)))
    }

    async fn list_locks(&self, query: &LockQuery) -> Result<Vec<LockRecord>, Error> {
        let now = self.clock.now();
        let records = self
            .rows()
            .iter()
            .filter(|(name, _)| query.matches(name))
            .map(|(name, row)| record(name, row, now))
            .collect();
        Ok(query.apply(records))
    }

    async fn store_time(&self) -> Result<SystemTime, Error> {
        Ok(self.clock.now())
    }

    async fn release_lock(&self, record: &LockRecord) -> Result<bool, Error> {
        let (name, holder, fencing_token) = (&*record.name, &*record.holder, record.fencing_token);
        let now = self.clock.now();
        match self.rows().get_mut(name) {
            Some(row)
                if *row.locked_by == *holder
                    && row.fencing_token == fencing_token
                    && row.lock_until > now =>
            {
                row.lock_until = now;
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

fn record(name: &str, row: &Row, now: SystemTime) -> LockRecord {
    LockRecord::new(
        name,
        &*row.locked_by,
        row.locked_at,
        row.lock_until,
        row.fencing_token,
        now,
    )
}

#[async_trait]
impl RunLog for InMemoryLockProvider {
    async fn run_started(&self, start: &RunStart) -> Result<RunRecord, Error> {
        let now = self.clock.now();
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(existing) = runs.iter().find(|r| same_run(r, start)) {
            return Ok(existing.clone());
        }
        let record = RunRecord::started(start, now);
        if runs.len() >= MAX_RUNS {
            runs.pop_front();
        }
        runs.push_back(record.clone());
        Ok(record)
    }

    async fn run_finished(&self, start: &RunStart, end: &RunEnd) -> Result<(), Error> {
        let now = self.clock.now();
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        match runs.iter_mut().find(|r| same_run(r, start)) {
            Some(record) if record.outcome == RunOutcome::Running => {
                *record = record.clone().finished(end, now);
            }
            Some(_) => {}
            None => {
                if runs.len() >= MAX_RUNS {
                    runs.pop_front();
                }
                runs.push_back(RunRecord::started(start, now).finished(end, now));
            }
        }
        // Trimmed on every end: the lock that ended to its newest `runs_per_lock`, every lock
        // by age.
        let (retention, per_lock) = self.keeping;
        let oldest = now.checked_sub(retention);
        // Within one lock the place is start, token, attempt.
        let mut of_lock: Vec<_> = runs
            .iter()
            .filter(|r| r.lock == start.lock)
            .map(|r| (r.started_at, r.fencing_token, r.attempt))
            .collect();
        of_lock.sort_unstable_by(|a, b| b.cmp(a));
        let cut = of_lock.get(per_lock as usize).copied();
        runs.retain(|r| {
            oldest.is_none_or(|oldest| r.started_at >= oldest)
                && (r.lock != start.lock
                    || cut.is_none_or(|cut| (r.started_at, r.fencing_token, r.attempt) > cut))
        });
        Ok(())
    }

    async fn run_alive(&self, start: &RunStart, lease: Duration) -> Result<bool, Error> {
        let now = self.clock.now();
        let mut runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        match runs.iter_mut().find(|r| same_run(r, start)) {
            Some(record)
                if record.outcome == RunOutcome::Running
                    && record.alive_until.is_none_or(|until| until > now) =>
            {
                record.alive_until = now.checked_add(lease);
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        let runs = self.runs.lock().unwrap_or_else(|e| e.into_inner());
        Ok(query.apply(runs.iter().filter(|r| query.matches(r)).cloned().collect()))
    }
}

fn same_run(record: &RunRecord, start: &RunStart) -> bool {
    record.lock == start.lock
        && record.fencing_token == start.fencing_token
        && record.attempt == start.attempt
}

#[async_trait]
impl Board for InMemoryLockProvider {
    async fn board_read(&self, prefix: &str) -> Result<Vec<BoardEntry>, Error> {
        let now = self.clock.now();
        let board = self.board.lock().unwrap_or_else(|e| e.into_inner());
        Ok(board
            .0
            .range(prefix.to_owned()..)
            .take_while(|(key, _)| key.starts_with(prefix))
            .filter(|(_, entry)| live(entry, now))
            .map(|(_, entry)| entry.clone())
            .collect())
    }

    async fn board_write(
        &self,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>, Error> {
        crate::validate_board_entry(key, value)?;
        let now = self.clock.now();
        let mut board = self.board.lock().unwrap_or_else(|e| e.into_inner());
        let current = board.0.get(key).filter(|entry| live(entry, now));
        if !holds(current, condition) {
            return Ok(None);
        }
        board.1 += 1;
        let version = board.1;
        let expires_at = ttl.and_then(|ttl| now.checked_add(ttl));
        let entry = BoardEntry::new(key, value, version, now, expires_at);
        board.0.insert(key.to_owned(), entry);
        Ok(Some(version))
    }

    async fn board_remove(&self, key: &str, condition: BoardCondition) -> Result<bool, Error> {
        let now = self.clock.now();
        let mut board = self.board.lock().unwrap_or_else(|e| e.into_inner());
        let current = board.0.get(key).filter(|entry| live(entry, now));
        let removed = current.is_some() && holds(current, condition);
        if removed || current.is_none() {
            // An expired entry goes too: it is absent for everyone already.
            board.0.remove(key);
        }
        Ok(removed)
    }
}

fn live(entry: &BoardEntry, now: SystemTime) -> bool {
    entry.expires_at.is_none_or(|expires_at| expires_at > now)
}

fn holds(current: Option<&BoardEntry>, condition: BoardCondition) -> bool {
    match condition {
        BoardCondition::Always => true,
        BoardCondition::Absent => current.is_none(),
        BoardCondition::Version(version) => current.is_some_and(|entry| entry.version == version),
    }
}
