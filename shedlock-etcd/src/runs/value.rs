//! A run record's value: JSON, readable with etcdctl; start and end in microseconds, tick and
//! heartbeat deadline in milliseconds, of the writing instance's clock (etcd has none).

use serde::{Deserialize, Serialize};
use shedlock_core::{RunEnd, RunOutcome, RunRecord, RunStart};

use crate::error::EtcdError;
use crate::record::{from_ms, from_us, to_ms, to_us};
use crate::wire::KeyValue;

#[derive(Debug, Serialize, Deserialize)]
struct RunValue {
    lock: String,
    job: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tick_ms: Option<u64>,
    holder: String,
    token: u64,
    attempt: u32,
    started_at_us: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    finished_at_us: Option<u64>,
    outcome: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// The heartbeat's deadline as its runner last wrote it; whether it still runs is its
    /// heartbeat key's (see `runs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    alive_until_ms: Option<u64>,
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
            started_at_us: to_us(record.started_at),
            finished_at_us: record.finished_at.map(to_us),
            outcome: record.outcome.as_str().to_owned(),
            error: record.error.clone(),
            alive_until_ms: record.alive_until.map(to_ms),
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
        let mut record = RunRecord::started(&start, from_us(self.started_at_us));
        if let Some(finished) = self.finished_at_us {
            let end = match self.error {
                Some(error) => RunEnd::with_error(outcome, error),
                None => RunEnd::succeeded(),
            };
            record = record.finished(&end, from_us(finished));
        }
        record.outcome = outcome;
        if outcome == RunOutcome::Running {
            record.alive_until = self.alive_until_ms.map(from_ms);
        }
        Ok(record)
    }
}

pub(super) fn encode(record: &RunRecord) -> Vec<u8> {
    serde_json::to_vec(&RunValue::of(record)).unwrap_or_default()
}

pub(super) fn decode(kv: &KeyValue) -> Result<RunRecord, EtcdError> {
    serde_json::from_slice::<RunValue>(&kv.value)
        .map_err(|e| e.to_string())
        .and_then(RunValue::record)
        .map_err(|reason| EtcdError::Unreadable {
            key: String::from_utf8_lossy(&kv.key).into_owned(),
            reason,
        })
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use super::*;

    fn kv(value: Vec<u8>) -> KeyValue {
        KeyValue {
            key: b"k".to_vec(),
            value,
            ..KeyValue::default()
        }
    }

    #[test]
    fn records_read_back_with_their_heartbeat_while_running() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        let start = RunStart::new("l", "j", Some(at), "h", 7)
            .attempt(2)
            .alive_for(Duration::from_secs(30));
        let running = RunRecord::started(&start, at);
        assert_eq!(decode(&kv(encode(&running))).unwrap(), running);
        let failed = running.finished(&RunEnd::with_error(RunOutcome::Failed, "<boom>"), at);
        assert_eq!(decode(&kv(encode(&failed))).unwrap(), failed);
        let error = decode(&kv(b"{}".to_vec())).unwrap_err();
        assert!(error.to_string().contains("etcdctl del k"), "{error}");
    }
}
