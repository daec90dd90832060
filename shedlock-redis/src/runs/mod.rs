//! Run records ([`RunLog`](shedlock_core::RunLog)) in Redis, beside the lock hashes but under
//! a prefix of their own, so that nothing reading the lock keys ever meets them.
//!
//! Under the runs key prefix `R` (default `runs:` followed by the key prefix, so
//! `runs:shedlock:`), each lock with records has two keys, and the prefix one more:
//!
//! ```text
//! R records:<lock>   hash: run id -> the record as JSON (every number a decimal string)
//! R started:<lock>   sorted set: run id, scored by its start (ms of the server's TIME)
//! R locks            sorted set: the names of the locks with records, by their last write
//! ```
//!
//! A run id is `<token>:<attempt>`, both zero-padded (20 and 10 digits), so that runs that
//! started in the same millisecond sort by token and attempt. Starting and ending a run is one
//! script each (one round trip): it reads `TIME`, writes the record, keeps "the first end stays"
//! (an end meets a record still running, or none), and trims what the retention no longer
//! allows. Reads of one lock are one script; a read of every lock reads `R locks` first, then
//! each lock: no key is ever scanned for.

mod majority;
mod single;
mod stored;

use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures_util::future::try_join_all;
use redis::Script;
use shedlock_core::{Error, RunEnd, RunQuery, RunStart, validate_run_retention};

use crate::error::ServerError;
use crate::keys::{millis, validate_prefix};
use crate::node::Node;
pub(crate) use stored::RunEntry;

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

/// Reads one lock's records, newest first: `{id, JSON, …}`.
static RUNS: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/runs.lua")));

/// The locks with records written since a time.
static RUN_LOCKS: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../../lua/run_locks.lua")));

/// Where run records live and what is kept of them.
#[derive(Debug, Clone)]
pub(crate) struct RunKeys {
    prefix: Arc<str>,
    retention_ms: u64,
    per_lock: u32,
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
        })
    }

    fn records(&self, lock: &str) -> String {
        format!("{}records:{lock}", self.prefix)
    }

    fn started(&self, lock: &str) -> String {
        format!("{}started:{lock}", self.prefix)
    }

    fn locks(&self) -> String {
        format!("{}locks", self.prefix)
    }
}

/// A run's id in its lock's keys: token and attempt, zero-padded so ids sort as numbers.
fn run_id(start: &RunStart) -> String {
    format!("{:020}:{:010}", start.fencing_token, start.attempt)
}

/// Milliseconds since the epoch as the scripts take them, rounded up (a record at a whole
/// millisecond is at or after `time` only if that millisecond is); `-inf` before the epoch.
fn since_arg(since: Option<SystemTime>) -> String {
    match since.map(|time| time.duration_since(UNIX_EPOCH)) {
        Some(Ok(after)) => millis(after).to_string(),
        _ => "-inf".to_owned(),
    }
}

impl Node {
    /// Runs a run-writing script with the arguments of `lua/run_keep.lua`.
    async fn write_run<T: redis::FromRedisValue>(
        &self,
        script: &Script,
        keys: &RunKeys,
        start: &RunStart,
        end: Option<&RunEnd>,
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
            .key(keys.locks())
            .arg(run_id(start))
            .arg(&start.lock)
            .arg(&start.job)
            .arg(tick)
            .arg(&start.holder)
            .arg(start.fencing_token.to_string())
            .arg(start.attempt.to_string())
            .arg(keys.retention_ms)
            .arg(keys.per_lock);
        if let Some(end) = end {
            invocation.arg(end.outcome.as_str());
            if let Some(error) = &end.error {
                invocation.arg(error);
            }
        }
        self.run(Some(&records), &invocation).await
    }

    /// Records `start` (or finds it recorded); its record as stored.
    pub(crate) async fn run_started(
        &self,
        keys: &RunKeys,
        start: &RunStart,
    ) -> Result<RunEntry, ServerError> {
        let json: String = self.write_run(&RUN_STARTED, keys, start, None).await?;
        Ok(RunEntry {
            key: keys.records(&start.lock),
            id: run_id(start),
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
        let _written: i64 = self
            .write_run(&RUN_FINISHED, keys, start, Some(end))
            .await?;
        Ok(())
    }

    /// The stored records of one lock, newest first.
    async fn lock_runs(
        &self,
        keys: &RunKeys,
        lock: &str,
        query: &RunQuery,
    ) -> Result<Vec<RunEntry>, ServerError> {
        let records = keys.records(lock);
        let limit = query
            .limit
            .map_or(-1, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
        let mut invocation = RUNS.prepare_invoke();
        invocation
            .key(&records)
            .key(keys.started(lock))
            .arg(since_arg(query.since))
            .arg(limit);
        let reply: Vec<Option<String>> = self.run(Some(&records), &invocation).await?;
        Ok(reply
            .chunks(2)
            .map(|pair| RunEntry {
                key: records.clone(),
                id: pair[0].clone().unwrap_or_default(),
                json: pair.get(1).cloned().flatten(),
            })
            .collect())
    }

    /// The locks with records written at or after `since`.
    async fn run_locks(
        &self,
        keys: &RunKeys,
        since: Option<SystemTime>,
    ) -> Result<Vec<String>, ServerError> {
        let locks = keys.locks();
        let mut invocation = RUN_LOCKS.prepare_invoke();
        invocation.key(&locks).arg(since_arg(since));
        self.run(Some(&locks), &invocation).await
    }

    /// The stored records `query` asks for, of every lock it covers; newest first per lock,
    /// each lock cut to the query's limit.
    pub(crate) async fn runs(
        &self,
        keys: &RunKeys,
        query: &RunQuery,
    ) -> Result<Vec<(String, Vec<RunEntry>)>, ServerError> {
        if query.limit == Some(0) {
            return Ok(Vec::new());
        }
        let locks = match &query.lock {
            Some(lock) => vec![lock.clone()],
            None => self.run_locks(keys, query.since).await?,
        };
        try_join_all(locks.into_iter().map(|lock| async move {
            let entries = self.lock_runs(keys, &lock, query).await?;
            Ok((lock, entries))
        }))
        .await
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
        assert_eq!(default.locks(), "runs:shedlock:locks");
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
    fn since_rounds_up_to_a_millisecond() {
        let at = |micros| Some(UNIX_EPOCH + Duration::from_micros(micros));
        assert_eq!(since_arg(at(5_000)), "5");
        assert_eq!(since_arg(at(5_001)), "6");
        assert_eq!(since_arg(None), "-inf");
    }
}
