//! Run records as keys beside the locks, `<prefix>runs/<lock>/<token>-<attempt>`, each on an
//! etcd lease of the retention: etcd deletes a record when its retention has passed, and the
//! newest `runs_per_lock` of a lock are kept.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use shedlock_core::async_trait;
use shedlock_core::{
    Error, Operation, RunEnd, RunLog, RunOutcome, RunQuery, RunRecord, RunStart,
    validate_run_retention,
};

use crate::EtcdLockProvider;
use crate::error::EtcdError;
use crate::keys::ttl_seconds;
use crate::record::{from_ms, now_ms, to_ms};
use crate::wire::{self, KeyValue};

/// A lock's records beyond `runs_per_lock` are deleted after every this many ends a provider
/// records, not after each: the hot path stays one read and one transaction.
const TRIM_EVERY: u64 = 32;

/// What is kept of the run records, shared by a provider's clones.
#[derive(Debug, Clone)]
pub(crate) struct Retention {
    pub(crate) keep_for: Duration,
    pub(crate) per_lock: u32,
    ends: Arc<AtomicU64>,
}

impl Retention {
    pub(crate) fn new(keep_for: Duration, per_lock: u32) -> Result<Self, Error> {
        validate_run_retention(keep_for, per_lock)?;
        if keep_for < Duration::from_secs(1) {
            return Err(Error::invalid_config(
                "run_retention",
                "must be at least one second (records live on etcd leases of whole seconds)",
            ));
        }
        Ok(Retention {
            keep_for,
            per_lock,
            ends: Arc::default(),
        })
    }

    fn trim_due(&self) -> bool {
        self.ends.fetch_add(1, Ordering::Relaxed) % TRIM_EVERY == TRIM_EVERY - 1
    }
}

/// A record's value: JSON, times in milliseconds of the writing instance's clock.
#[derive(Debug, Serialize, Deserialize)]
struct RunValue {
    lock: String,
    job: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tick_ms: Option<u64>,
    holder: String,
    token: u64,
    attempt: u32,
    started_at_ms: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    finished_at_ms: Option<u64>,
    outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

impl RunValue {
    fn of(record: &RunRecord) -> Self {
        RunValue {
            lock: record.lock.clone(),
            job: record.job.clone(),
            tick_ms: record.tick.map(to_ms),
            holder: record.holder.clone(),
            token: record.fencing_token,
            attempt: record.attempt,
            started_at_ms: to_ms(record.started_at),
            finished_at_ms: record.finished_at.map(to_ms),
            outcome: record.outcome.as_str().to_owned(),
            error: record.error.clone(),
        }
    }

    fn record(self) -> Result<RunRecord, String> {
        let outcome = RunOutcome::parse(&self.outcome)
            .ok_or_else(|| format!("unknown outcome {:?}", self.outcome))?;
        let start = RunStart::new(
            self.lock,
            self.job,
            self.tick_ms.map(from_ms),
            self.holder,
            self.token,
        )
        .attempt(self.attempt);
        let record = RunRecord::started(&start, from_ms(self.started_at_ms));
        Ok(match self.finished_at_ms {
            Some(finished) => {
                let end = match self.error {
                    Some(error) => RunEnd::with_error(outcome, error),
                    None => RunEnd::succeeded(),
                };
                let mut record = record.finished(&end, from_ms(finished));
                record.outcome = outcome;
                record
            }
            None => record,
        })
    }
}

fn encode(record: &RunRecord) -> Vec<u8> {
    serde_json::to_vec(&RunValue::of(record)).unwrap_or_default()
}

fn decode(kv: &KeyValue) -> Result<RunRecord, EtcdError> {
    serde_json::from_slice::<RunValue>(&kv.value)
        .map_err(|e| e.to_string())
        .and_then(RunValue::record)
        .map_err(|reason| EtcdError::Unreadable {
            key: String::from_utf8_lossy(&kv.key).into_owned(),
            reason,
        })
}

impl EtcdLockProvider {
    /// Writes `record` at `key` on a new retention lease if the key is absent; otherwise
    /// returns what is there.
    async fn create_run(
        &self,
        key: &[u8],
        record: &RunRecord,
    ) -> Result<Option<KeyValue>, EtcdError> {
        let lease = self
            .client
            .grant(ttl_seconds(self.retention.keep_for))
            .await?
            .id;
        let request = wire::TxnRequest {
            compare: vec![wire::created_at(key, 0)],
            success: vec![wire::put(key, encode(record), lease)],
            failure: vec![wire::get(key)],
        };
        let response = self.client.txn_on_leases(request, &[lease]).await?;
        if response.succeeded {
            return Ok(None);
        }
        Ok(response.range(0).first().cloned())
    }

    /// Deletes the oldest records of `lock` beyond `runs_per_lock`.
    async fn trim_runs(&self, lock: &str) -> Result<(), EtcdError> {
        let start = self.keys.runs_of(Some(lock));
        let response = self
            .client
            .range(wire::RangeRequest::prefix(&start, true))
            .await?;
        // Keys of this lock only (a lock named "<lock>/x" shares the start), sorted by token.
        let own: Vec<&KeyValue> = response
            .kvs
            .iter()
            .filter(|kv| !kv.key[start.len()..].contains(&b'/'))
            .collect();
        let excess = own.len().saturating_sub(self.retention.per_lock as usize);
        if excess == 0 {
            return Ok(());
        }
        let success = own[..excess]
            .iter()
            .map(|kv| wire::delete(&kv.key))
            .collect();
        self.client
            .txn(wire::TxnRequest {
                compare: Vec::new(),
                success,
                failure: Vec::new(),
            })
            .await?;
        Ok(())
    }
}

#[async_trait]
impl RunLog for EtcdLockProvider {
    async fn run_started(&self, start: &RunStart) -> Result<RunRecord, Error> {
        let fail = |e: EtcdError| e.into_store(Operation::Runs, &start.lock);
        let key = self
            .keys
            .run(&start.lock, start.fencing_token, start.attempt);
        let record = RunRecord::started(start, from_ms(now_ms()));
        match self.create_run(&key, &record).await.map_err(fail)? {
            None => Ok(record),
            Some(existing) => decode(&existing).map_err(fail),
        }
    }

    async fn run_finished(&self, start: &RunStart, end: &RunEnd) -> Result<(), Error> {
        let fail = |e: EtcdError| e.into_store(Operation::Runs, &start.lock);
        let key = self
            .keys
            .run(&start.lock, start.fencing_token, start.attempt);
        // A compare-and-set on the record; a concurrent first end wins, and a record that
        // appears meanwhile is read again.
        for _ in 0..3 {
            let read = self
                .client
                .range(wire::RangeRequest::key(&key))
                .await
                .map_err(fail)?;
            let now = from_ms(now_ms());
            let Some(kv) = read.kvs.first() else {
                let whole = RunRecord::started(start, now).finished(end, now);
                match self.create_run(&key, &whole).await.map_err(fail)? {
                    None => break,
                    Some(_) => continue,
                }
            };
            let record = decode(kv).map_err(fail)?;
            if record.outcome != RunOutcome::Running {
                return Ok(());
            }
            let finished = record.finished(end, now);
            let response = self
                .client
                .txn(wire::TxnRequest {
                    compare: vec![wire::modified_at(&key, kv.mod_revision)],
                    success: vec![wire::put(&key, encode(&finished), kv.lease)],
                    failure: Vec::new(),
                })
                .await
                .map_err(fail)?;
            if response.succeeded {
                break;
            }
        }
        if self.retention.trim_due()
            && let Err(error) = self.trim_runs(&start.lock).await
        {
            tracing::debug!(lock = %start.lock, %error, "trimming run records failed; the next trim retries");
        }
        Ok(())
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        let what = query.lock.as_deref().unwrap_or(self.keys.prefix());
        let fail = |e: EtcdError| e.into_store(Operation::Runs, what);
        let start = self.keys.runs_of(query.lock.as_deref());
        let response = self
            .client
            .range(wire::RangeRequest::prefix(&start, false))
            .await
            .map_err(fail)?;
        let records = response
            .kvs
            .iter()
            .map(decode)
            .collect::<Result<Vec<_>, _>>()
            .map_err(fail)?;
        Ok(query.apply(records))
    }
}
