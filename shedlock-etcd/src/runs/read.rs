//! Reading run records: the lock, `before`, `since` and the limit go into the ranges, which
//! are read in pages of a bounded size, so a read costs what it returns, whatever the history,
//! and no answer nears gRPC's message limit (4 MiB) even with errors of the longest kept.

use std::time::{Duration, SystemTime};

use shedlock_core::{RunOutcome, RunQuery, RunRecord};

use super::value::decode;
use crate::EtcdLockProvider;
use crate::error::EtcdError;
use crate::names::TimeKey;
use crate::record::{from_ms, from_us, now_ms, to_us};
use crate::wire;

/// Records per etcd request: about 120 KiB with errors of the longest kept, under 1 MiB even
/// when those are made of characters JSON escapes; and two operations each (record and
/// heartbeat), well within etcd's 128 per transaction.
const PAGE: usize = 50;

/// `record` as read at `read_at`: a running run's heartbeat goes on while its heartbeat key
/// exists (etcd's lease), whatever the clocks say, and has passed once the key is gone.
fn with_heartbeat(mut record: RunRecord, alive: bool, read_at: SystemTime) -> RunRecord {
    if record.outcome == RunOutcome::Running
        && let Some(until) = record.alive_until
    {
        record.alive_until = Some(if alive {
            until.max(read_at + Duration::from_millis(1))
        } else {
            until.min(read_at)
        });
    }
    record
}

/// Microseconds since the epoch of `time`, rounded up.
fn us_up(time: SystemTime) -> u64 {
    let floor = to_us(time);
    if from_us(floor) < time {
        floor + 1
    } else {
        floor
    }
}

/// `key` followed by a zero byte: the first key after it.
fn after(mut key: Vec<u8>) -> Vec<u8> {
    key.push(0);
    key
}

impl EtcdLockProvider {
    /// One lock's records, newest first (by token and attempt): a range from the lock's newest
    /// (or from `before`'s token and attempt), as long as the limit, in pages.
    pub(super) async fn runs_of_lock(
        &self,
        lock: &str,
        query: &RunQuery,
    ) -> Result<Vec<RunRecord>, EtcdError> {
        let want = query.limit.unwrap_or(usize::MAX);
        let start = self.keys.runs_of(lock);
        let id_at = start.len();
        let end = wire::prefix_end(&start);
        let mut from = match &query.before {
            Some(before) => after(self.keys.run(lock, before.fencing_token, before.attempt)),
            None => start,
        };
        let alive_start = self.keys.alive_of(lock);
        let mut records = Vec::new();
        while records.len() < want {
            let page = (want - records.len()).min(PAGE);
            // With each page, the lock's heartbeat keys: one per run running now, or whose
            // instance died less than its heartbeat ago.
            let response = self
                .client
                .read_txn(wire::TxnRequest {
                    compare: Vec::new(),
                    success: vec![
                        wire::range(wire::RangeRequest::between(from.clone(), end.clone(), page)),
                        wire::range(wire::RangeRequest::prefix(&alive_start, true)),
                    ],
                    failure: Vec::new(),
                })
                .await?;
            let read_at = from_ms(now_ms());
            let alive: Vec<&[u8]> = response
                .range(1)
                .iter()
                .map(|kv| &kv.key[alive_start.len()..])
                .collect();
            let kvs = response.range(0);
            for kv in kvs {
                let record = decode(kv)?;
                if query.since.is_some_and(|since| record.started_at < since) {
                    return Ok(records);
                }
                let id = &kv.key[id_at..];
                records.push(with_heartbeat(record, alive.contains(&id), read_at));
            }
            match kvs.last() {
                Some(last) if kvs.len() == page => from = after(last.key.clone()),
                _ => break,
            }
        }
        Ok(records)
    }

    /// Every lock's records, newest first by start: a range of the index by start time from
    /// `before` to `since`, as long as the limit, keys only; then the records it names, in
    /// pages.
    pub(super) async fn runs_of_every_lock(
        &self,
        query: &RunQuery,
    ) -> Result<Vec<RunRecord>, EtcdError> {
        let want = query.limit.unwrap_or(usize::MAX);
        let section = self.keys.section("run-time");
        let mut from = match &query.before {
            // Past every entry at the cursor (any lock), or, for a cursor within a
            // microsecond, at the first entry of that microsecond or older.
            Some(before) => {
                let at = to_us(before.started_at);
                if from_us(at) == before.started_at {
                    wire::prefix_end(&self.keys.by_time_from(
                        at,
                        before.fencing_token,
                        before.attempt,
                    ))
                } else {
                    let mut key = section.clone();
                    key.extend_from_slice(format!("{:016x}", u64::MAX - at).as_bytes());
                    key
                }
            }
            None => section.clone(),
        };
        let end = match query.since.map(us_up) {
            // Entries started at `since` or later: start time (inverted) up to its own.
            Some(since) if since > 0 => {
                let mut key = section.clone();
                key.extend_from_slice(format!("{:016x}", u64::MAX - since + 1).as_bytes());
                key
            }
            _ => wire::prefix_end(&section),
        };
        let mut records = Vec::new();
        while records.len() < want && from < end {
            let page = (want - records.len()).min(PAGE);
            let index = self
                .client
                .range(wire::RangeRequest {
                    keys_only: true,
                    ..wire::RangeRequest::between(from.clone(), end.clone(), page)
                })
                .await?;
            let entries: Vec<TimeKey<'static>> = index
                .kvs
                .iter()
                .filter_map(|kv| self.keys.parse_by_time(&kv.key))
                .collect();
            let mut gets = Vec::with_capacity(entries.len() * 2);
            for entry in &entries {
                gets.push(wire::get(&self.keys.run(
                    &entry.lock,
                    entry.token,
                    entry.attempt,
                )));
                gets.push(wire::get(&self.keys.alive(
                    &entry.lock,
                    entry.token,
                    entry.attempt,
                )));
            }
            let response = self
                .client
                .read_txn(wire::TxnRequest {
                    compare: Vec::new(),
                    success: gets,
                    failure: Vec::new(),
                })
                .await?;
            let read_at = from_ms(now_ms());
            for (i, entry) in entries.iter().enumerate() {
                // Gone since the index was read (trimmed, or its bucket ended): left out.
                let Some(kv) = response.range(2 * i).first() else {
                    continue;
                };
                let record: RunRecord = decode(kv)?;
                if to_us(record.started_at) != entry.started_us {
                    // An entry left by a record written again since (a late end recorded
                    // whole after its start was trimmed): the record has its own entry.
                    continue;
                }
                let alive = !response.range(2 * i + 1).is_empty();
                records.push(with_heartbeat(record, alive, read_at));
            }
            match index.kvs.last() {
                Some(last) if index.kvs.len() == page => from = after(last.key.clone()),
                _ => break,
            }
        }
        records.truncate(want);
        Ok(records)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shedlock_core::RunStart;

    #[test]
    fn a_heartbeat_goes_on_while_its_key_exists_and_has_passed_once_it_is_gone() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1000);
        let start = RunStart::new("l", "j", None, "h", 1).alive_for(Duration::from_secs(10));
        let running = RunRecord::started(&start, t0);
        let later = t0 + Duration::from_secs(20);
        let on = with_heartbeat(running.clone(), true, later);
        assert!(on.is_alive(later), "etcd still holds its lease: {on:?}");
        let off = with_heartbeat(running.clone(), false, t0 + Duration::from_secs(1));
        assert!(!off.is_alive(t0 + Duration::from_secs(1)), "{off:?}");
        assert_eq!(
            with_heartbeat(running.clone(), false, later).alive_until,
            running.alive_until,
            "a deadline that passed reads as written"
        );
        assert_eq!(us_up(t0 + Duration::from_nanos(1)), 1_000_000_001);
        assert_eq!(us_up(t0), 1_000_000_000);
    }
}
