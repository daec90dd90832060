//! Run records ([`RunLog`](shedlock_core::RunLog)) in Redis, beside the lock hashes but under
//! a prefix of their own, so that nothing reading the lock keys ever meets them.
//!
//! Under the runs key prefix `R` (default `runs:` followed by the key prefix, so
//! `runs:shedlock:`), each lock with records has two keys, and the prefix one more:
//!
//! ```text
//! R records:<lock>   hash: run id -> the record as JSON (every number a decimal string)
//! R started:<lock>   sorted set: run id, scored by its start (ms of the server's TIME)
//! R index            sorted set: '<run id>:<lock>' of every lock's runs, scored the same
//! ```
//!
//! A run id is `<token>:<attempt>`, both zero-padded (20 and 10 digits), so that runs that
//! started in the same millisecond sort by token and attempt: a sorted set's order (score,
//! then member) is the order runs are listed in ([`RunCursor`](shedlock_core::RunCursor)).
//!
//! Starting and ending a run is one script each (one round trip, as before the index): it reads
//! `TIME`, writes the record, keeps "the first end stays" (an end meets a record still running,
//! or none), and trims by construction: the lock's records past the retention and beyond the
//! newest `runs_per_lock` go in the same script, and so do up to [`SWEEP_PER_WRITE`] of the
//! oldest runs of the index past the retention, of any lock (a lock that never runs again loses
//! its old records to the writes of the others). A lock therefore never holds more than
//! `runs_per_lock` records, and a record past the retention goes at the next write of its lock
//! or within the next writes of any lock (each write removes up to [`SWEEP_PER_WRITE`] of
//! them, while it adds one). Every key also expires a retention after its last write. The one
//! exception is a live run (running, heartbeat not passed): both bounds keep it until it ends
//! or its heartbeat passes, since its runner stops when a renewal finds no record; so a lock
//! holds at most `runs_per_lock` plus its live runs.
//!
//! Runs written without the index (by the version before it) are added to it at their lock's
//! next write (the index lacks the lock's oldest run: all its runs are added), so reads across
//! locks find them from then on; those of a lock that never writes again expire with its keys.
//!
//! A heartbeat renewal (`run_alive`) is one script on the record's hash; it also keeps the
//! lock's keys from expiring before the new heartbeat.
//!
//! A read is one script: a page of one lock from its `started` set, or of every lock from the
//! index, newest first from `before` (`ZREVRANGEBYSCORE` with an exclusive maximum, then the
//! runs of the cursor's own millisecond that sort below it) and cut by `LIMIT` in Redis: it
//! reads the page and nothing more, however long the history.

mod majority;
mod single;
mod stored;

use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Script;
use shedlock_core::{
    Error, RunCursor, RunEnd, RunQuery, RunRecord, RunStart, validate_run_retention,
};

use crate::error::ServerError;
use crate::names::validate_prefix;
use crate::node::Node;
use crate::time::millis;
pub(crate) use stored::RunEntry;

/// How many runs of other locks past the retention one write deletes at most (the sweep of
/// locks that no longer run): bounded, so a write's cost does not depend on the history, and
/// more than the one record a write adds, so the backlog shrinks.
pub(crate) const SWEEP_PER_WRITE: u32 = 64;

/// The most records one read script returns: a query without a limit is read by pages of
/// this many, so no script builds a reply of a whole history (Redis serves nothing else
/// while a script runs).
pub(crate) const READ_PAGE: usize = 500;

/// The records of `query`, read by `page` (a page of a query with a limit): at once when the
/// query has a limit of at most [`READ_PAGE`], else page after page.
pub(crate) async fn by_pages<F, Fut>(query: &RunQuery, page: F) -> Result<Vec<RunRecord>, Error>
where
    F: Fn(RunQuery) -> Fut,
    Fut: Future<Output = Result<Vec<RunRecord>, Error>>,
{
    if query.limit.is_some_and(|limit| limit <= READ_PAGE) {
        return page(query.clone()).await;
    }
    let mut records = Vec::new();
    let mut next = query.clone();
    loop {
        let left = query.limit.map_or(READ_PAGE, |limit| limit - records.len());
        let read = page(next.clone().limit(left.min(READ_PAGE))).await?;
        let full = read.len() == left.min(READ_PAGE);
        let Some(last) = read.last() else { break };
        next = next.before(last.cursor());
        records.extend(read);
        if !full || query.limit.is_some_and(|limit| records.len() >= limit) {
            break;
        }
    }
    Ok(records)
}

/// Writes a run's start; replies its record. See `lua/run_keep.lua` for the arguments.
static RUN_STARTED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../lua/run_keep.lua"),
        include_str!("../../lua/run_started.lua")
    ))
});

/// Writes a run's end unless it ended already; replies 1 when written, 0 when not.
static RUN_FINISHED: LazyLock<Script> = LazyLock::new(|| {
    Script::new(concat!(
        include_str!("../../lua/run_keep.lua"),
        include_str!("../../lua/run_finished.lua")
    ))
});

/// Renews a running record's heartbeat; replies 1 when renewed, 0 when not.
static RUN_ALIVE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/run_alive.lua")));

/// Reads a page of one lock's runs or of every lock's, newest first: `{member, JSON, …}`.
static RUNS: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/runs.lua")));

/// Where run records live and what is kept of them.
#[derive(Debug, Clone)]
pub(crate) struct RunKeys {
    prefix: Arc<str>,
    retention_ms: u64,
    per_lock: u32,
    /// On a Redis Cluster: a lock's keys carry its name as hash tag, each lock has an index
    /// of its own (`index:{<lock>}`, in its slot) and no write sweeps other locks (their keys
    /// expire a retention after their last write).
    cluster: bool,
}

impl RunKeys {
    /// Validates the builder's run settings against the (validated) lock key prefix.
    pub(crate) fn new(
        key_prefix: &str,
        prefix: Option<String>,
        retention: Duration,
        per_lock: u32,
    ) -> Result<Self, Error> {
        // The default, from a valid key prefix, is valid too (and may be longer than a prefix
        // one configures).
        let prefix: Arc<str> = match prefix {
            None => format!("runs:{key_prefix}").into(),
            Some(prefix) => validate_prefix(prefix).map_err(|error| match error {
                Error::InvalidConfig { message, .. } => {
                    Error::invalid_config("runs_key_prefix", message)
                }
                other => other,
            })?,
        };
        if prefix.starts_with(key_prefix) || key_prefix.starts_with(&*prefix) {
            return Err(Error::invalid_config(
                "runs_key_prefix",
                format!(
                    "{prefix:?} and the key prefix {key_prefix:?} must not start with each \
                     other: run records and lock hashes would share keys"
                ),
            ));
        }
        validate_run_retention(retention, per_lock)?;
        Ok(RunKeys {
            prefix,
            retention_ms: millis(retention),
            per_lock,
            cluster: false,
        })
    }

    /// The same keys, keeping records for `retention` and `per_lock` per lock.
    pub(crate) fn keeping(&self, retention: Duration, per_lock: u32) -> Result<Self, Error> {
        validate_run_retention(retention, per_lock)?;
        Ok(RunKeys {
            prefix: Arc::clone(&self.prefix),
            retention_ms: millis(retention),
            per_lock,
            cluster: self.cluster,
        })
    }

    /// The same keys laid out for a Redis Cluster.
    pub(crate) fn for_cluster(mut self) -> Self {
        self.cluster = true;
        self
    }

    fn records(&self, lock: &str) -> String {
        if self.cluster {
            format!("{}records:{{{lock}}}", self.prefix)
        } else {
            format!("{}records:{lock}", self.prefix)
        }
    }

    fn started(&self, lock: &str) -> String {
        if self.cluster {
            format!("{}started:{{{lock}}}", self.prefix)
        } else {
            format!("{}started:{lock}", self.prefix)
        }
    }

    fn index(&self) -> String {
        format!("{}index", self.prefix)
    }

    /// The index a write of `lock`'s runs keeps: every lock's, or on a cluster the lock's own.
    fn index_of(&self, lock: &str) -> String {
        if self.cluster {
            format!("{}index:{{{lock}}}", self.prefix)
        } else {
            self.index()
        }
    }

    /// How many runs of other locks a write sweeps: none on a cluster (a script's keys
    /// share one slot).
    fn sweep(&self) -> u32 {
        if self.cluster { 0 } else { SWEEP_PER_WRITE }
    }

    /// The prefix of every run-record key.
    pub(crate) fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Whether the keys are laid out for a Redis Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        self.cluster
    }

    /// On a cluster, the `started` keys of every lock (a `SCAN` pattern).
    pub(crate) fn started_pattern(&self) -> String {
        format!("{}started:*", self.prefix)
    }

    /// On a cluster, the lock of a `started` key.
    pub(crate) fn lock_of_started<'a>(&self, key: &'a str) -> Option<&'a str> {
        crate::cluster::lock_name(key, &format!("{}started:", self.prefix))
    }

    /// The records hash and the field of an index member (`<run id>:<lock>`).
    fn member_record(&self, member: &str) -> Option<(String, String, String)> {
        let (id, lock) = (member.get(..RUN_ID_LEN)?, member.get(RUN_ID_LEN + 1..)?);
        Some((self.records(lock), id.to_owned(), lock.to_owned()))
    }
}

/// The length of a run id: `<20 digits>:<10 digits>`.
const RUN_ID_LEN: usize = 31;

/// A run's id in its lock's keys: token and attempt, zero-padded so ids sort as numbers.
fn run_id(start: &RunStart) -> String {
    format_id(start.fencing_token, start.attempt)
}

fn format_id(token: u64, attempt: u32) -> String {
    format!("{token:020}:{attempt:010}")
}

/// Milliseconds since the epoch as the scripts take them, rounded up (a record at a whole
/// millisecond is at or after `time` only if that millisecond is); `-inf` before the epoch.
fn since_arg(since: Option<SystemTime>) -> String {
    match since.map(|time| time.duration_since(UNIX_EPOCH)) {
        Some(Ok(after)) => millis(after).to_string(),
        _ => "-inf".to_owned(),
    }
}

/// The read script's bounds for the page after `before` (records store whole milliseconds):
/// the newest start to read (`ARGV[3]`), and the millisecond whose runs are read first, those
/// below the cursor's `<run id>:<lock>` (`ARGV[4]`, `ARGV[5]`).
fn before_args(before: Option<&RunCursor>) -> (String, String, String) {
    let Some(cursor) = before else {
        return ("+inf".to_owned(), String::new(), String::new());
    };
    let Ok(since_epoch) = cursor.started_at.duration_since(UNIX_EPOCH) else {
        // Before the epoch: nothing is older.
        return ("(-inf".to_owned(), String::new(), String::new());
    };
    let ms = since_epoch.as_millis();
    if since_epoch.subsec_nanos() % 1_000_000 == 0 {
        (
            format!("({ms}"),
            ms.to_string(),
            format!(
                "{}:{}",
                format_id(cursor.fencing_token, cursor.attempt),
                cursor.lock
            ),
        )
    } else {
        // Between two milliseconds: every run of the one below is older.
        (ms.to_string(), String::new(), String::new())
    }
}

impl Node {
    /// Runs a run-writing script with the arguments of `lua/run_keep.lua`.
    async fn write_run<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        keys: &RunKeys,
        start: &RunStart,
        extra: &[&str],
    ) -> Result<T, ServerError> {
        let records = keys.records(&start.lock);
        let tick = start
            .tick
            .and_then(|tick| tick.duration_since(UNIX_EPOCH).ok())
            .map_or_else(String::new, |tick| tick.as_millis().to_string());
        let mut invocation = script.prepare_invoke();
        invocation
            .key(&records)
            .key(keys.started(&start.lock))
            .key(keys.index_of(&start.lock))
            .arg(run_id(start))
            .arg(&start.lock)
            .arg(&start.job)
            .arg(tick)
            .arg(&start.holder)
            .arg(start.fencing_token.to_string())
            .arg(start.attempt.to_string())
            .arg(keys.retention_ms)
            .arg(keys.per_lock)
            .arg(&*keys.prefix)
            .arg(keys.sweep());
        for arg in extra {
            invocation.arg(*arg);
        }
        self.run(Some(&records), &invocation).await
    }

    /// Records `start` (or finds it recorded); its record as stored.
    pub(crate) async fn run_started(
        &self,
        keys: &RunKeys,
        start: &RunStart,
    ) -> Result<RunEntry, ServerError> {
        let lease = start
            .lease
            .map_or_else(String::new, |lease| millis(lease).to_string());
        let json: String = self.write_run(&RUN_STARTED, keys, start, &[&lease]).await?;
        Ok(RunEntry {
            key: keys.records(&start.lock),
            id: run_id(start),
            lock: start.lock.clone(),
            json: Some(json),
        })
    }

    /// Records how `start` ended, unless its record ended already.
    pub(crate) async fn run_finished(
        &self,
        keys: &RunKeys,
        start: &RunStart,
        end: &RunEnd,
    ) -> Result<(), ServerError> {
        let mut extra = vec![end.outcome.as_str()];
        extra.extend(end.error.as_deref());
        let _written: i64 = self.write_run(&RUN_FINISHED, keys, start, &extra).await?;
        Ok(())
    }

    /// Renews the heartbeat of `start`'s record: whether it was (still running, heartbeat not
    /// passed).
    pub(crate) async fn run_alive(
        &self,
        keys: &RunKeys,
        start: &RunStart,
        lease: Duration,
    ) -> Result<bool, ServerError> {
        let records = keys.records(&start.lock);
        let mut invocation = RUN_ALIVE.prepare_invoke();
        invocation
            .key(&records)
            .key(keys.started(&start.lock))
            .key(keys.index_of(&start.lock))
            .arg(run_id(start))
            .arg(millis(lease));
        let renewed: i64 = self.run(Some(&records), &invocation).await?;
        Ok(renewed == 1)
    }

    /// The stored records of the page `query` asks for (at most `limit` of them, `None`:
    /// all), newest first by this server's times: of its lock, or of every lock.
    pub(crate) async fn runs(
        &self,
        keys: &RunKeys,
        query: &RunQuery,
        limit: Option<usize>,
    ) -> Result<Vec<RunEntry>, ServerError> {
        if limit == Some(0) {
            return Ok(Vec::new());
        }
        let limit = limit.map_or(-1, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
        let (newest, tied_ms, tied_below) = before_args(query.before.as_ref());
        let mut invocation = RUNS.prepare_invoke();
        let (index, records) = match &query.lock {
            Some(lock) => (keys.started(lock), keys.records(lock)),
            None => (keys.index(), String::new()),
        };
        invocation.key(&index);
        if query.lock.is_some() {
            invocation.key(&records);
        }
        invocation
            .arg(since_arg(query.since))
            .arg(limit)
            .arg(newest)
            .arg(tied_ms)
            .arg(tied_below)
            .arg(if query.lock.is_some() {
                ""
            } else {
                &*keys.prefix
            })
            .arg(query.lock.as_deref().unwrap_or(""));
        let reply: Vec<String> = self.run(Some(&index), &invocation).await?;
        let mut entries = Vec::with_capacity(reply.len() / 2);
        for pair in reply.chunks_exact(2) {
            let (member, json) = (&pair[0], pair[1].clone());
            let entry = match &query.lock {
                Some(lock) => RunEntry {
                    key: records.clone(),
                    id: member.clone(),
                    lock: lock.clone(),
                    json: Some(json),
                },
                None => {
                    let Some((key, id, lock)) = keys.member_record(member) else {
                        return Err(ServerError::new(
                            self.server(),
                            Some(&index),
                            crate::error::ServerErrorKind::UnexpectedReply(format!(
                                "index member {member:?} is not `<run id>:<lock>`"
                            )),
                        ));
                    };
                    RunEntry {
                        key,
                        id,
                        lock,
                        json: Some(json),
                    }
                }
            };
            entries.push(entry);
        }
        Ok(entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(key_prefix: &str, prefix: Option<&str>) -> Result<RunKeys, Error> {
        RunKeys::new(
            key_prefix,
            prefix.map(str::to_owned),
            shedlock_core::DEFAULT_RUN_RETENTION,
            shedlock_core::DEFAULT_RUNS_PER_LOCK,
        )
    }

    #[test]
    fn run_keys_stay_apart_from_lock_keys() {
        let default = keys("shedlock:", None).unwrap();
        assert_eq!(default.records("a"), "runs:shedlock:records:a");
        assert_eq!(default.started("a"), "runs:shedlock:started:a");
        assert_eq!(default.index(), "runs:shedlock:index");
        let longest = format!("{}:", "a".repeat(127));
        assert!(
            keys(&longest, None).is_ok(),
            "the default of the longest key prefix"
        );
        for (key_prefix, prefix) in [("shedlock:", "shedlock:runs:"), ("a:b:", "a:")] {
            let Err(Error::InvalidConfig { field, .. }) = keys(key_prefix, Some(prefix)) else {
                panic!("{prefix:?} accepted beside {key_prefix:?}");
            };
            assert_eq!(field, "runs_key_prefix");
        }
        let Err(Error::InvalidConfig { field, .. }) = keys("x:", Some("r*")) else {
            panic!("a glob character accepted");
        };
        assert_eq!(field, "runs_key_prefix");
    }

    #[test]
    fn run_ids_sort_as_token_then_attempt() {
        let id =
            |token, attempt| run_id(&RunStart::new("l", "j", None, "h", token).attempt(attempt));
        assert_eq!(id(7, 2), "00000000000000000007:0000000002");
        assert!(id(10, 1) > id(9, 2) && id(9, 2) > id(9, 1));
        assert_eq!(id(u64::MAX, u32::MAX).len(), 31);
    }

    #[test]
    fn index_members_name_their_record() {
        let keys = keys("shedlock:", None).unwrap();
        let member = format!("{}:a:b", format_id(7, 2));
        let (key, id, lock) = keys.member_record(&member).unwrap();
        assert_eq!(
            (key.as_str(), id.as_str(), lock.as_str()),
            (
                "runs:shedlock:records:a:b",
                "00000000000000000007:0000000002",
                "a:b"
            )
        );
        assert!(keys.member_record("7:1:a").is_none());
    }

    #[test]
    fn pages_start_below_the_cursor() {
        assert_eq!(
            before_args(None),
            ("+inf".into(), String::new(), String::new())
        );
        let whole = RunCursor::new(UNIX_EPOCH + Duration::from_millis(1500), 7, 2, "l");
        assert_eq!(
            before_args(Some(&whole)),
            (
                "(1500".into(),
                "1500".into(),
                format!("{}:l", format_id(7, 2))
            )
        );
        let between = RunCursor::new(UNIX_EPOCH + Duration::from_micros(1_500_500), 7, 2, "l");
        assert_eq!(
            before_args(Some(&between)),
            ("1500".into(), String::new(), String::new())
        );
    }

    #[test]
    fn since_rounds_up_to_a_millisecond() {
        let at = |micros| Some(UNIX_EPOCH + Duration::from_micros(micros));
        assert_eq!(since_arg(at(5_000)), "5");
        assert_eq!(since_arg(at(5_001)), "6");
        assert_eq!(since_arg(None), "-inf");
    }
}
