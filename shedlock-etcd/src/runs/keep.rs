//! What is kept of the run records: `runs_per_lock` per lock, trimmed from the lock's own
//! count, and `run_retention` through leases shared by every record written in one time bucket.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use shedlock_core::{Error, RUN_TRIM_SLACK, validate_run_retention};

use super::value::decode;
use crate::EtcdLockProvider;
use crate::error::EtcdError;
use crate::names::{TimeKey, ttl_seconds};
use crate::record::{ms, to_us};
use crate::wire::{self, KeyValue};

/// A lock's records are trimmed back to `runs_per_lock` once a write finds more than
/// `runs_per_lock` + this many: a trim every this many runs of the lock, whatever other locks
/// do and however many instances write.
const TRIM_AFTER: u64 = RUN_TRIM_SLACK as u64 / 2;

/// Records deleted per trimming transaction (each takes three operations: record, index entry,
/// heartbeat; etcd allows 128 per transaction by default).
const TRIM_PAGE: usize = 40;

/// Expired buckets revoked per write at most (normally none, or one).
const SWEEP_LIMIT: usize = 16;

/// Buckets per retention: a record lives at least `run_retention` less one bucket and at most
/// `run_retention`; with the default 14 days a bucket is 5¼ hours and about 65 leases live.
const BUCKETS: u64 = 64;

/// What is kept of the run records, shared by a provider's clones.
#[derive(Debug, Clone)]
pub(crate) struct Retention {
    pub(crate) keep_for: Duration,
    pub(crate) per_lock: u32,
    /// A bucket's length in milliseconds: whole seconds, at least one.
    bucket_ms: u64,
    /// The bucket this provider writes in now and its lease: one entry, replaced when the
    /// bucket changes (so nothing here grows).
    current: Arc<Mutex<Option<(u64, i64)>>>,
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
        let bucket_secs = ms(keep_for).div_ceil(BUCKETS).div_ceil(1000).max(1);
        Ok(Retention {
            keep_for,
            per_lock,
            bucket_ms: bucket_secs * 1000,
            current: Arc::default(),
        })
    }

    fn retention_ms(&self) -> u64 {
        ms(self.keep_for)
    }

    /// Whether a lock holding `count` records is due for a trim.
    pub(super) fn trim_due(&self, count: u64) -> bool {
        count > u64::from(self.per_lock) + TRIM_AFTER
    }

    fn cached(&self, index: u64) -> Option<i64> {
        let current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        current
            .filter(|(at, _)| *at == index)
            .map(|(_, lease)| lease)
    }

    fn remember(&self, index: u64, lease: i64) {
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some((index, lease));
    }

    /// Forgets `lease` (a write found it gone).
    pub(super) fn forget(&self, lease: i64) {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if current.is_some_and(|(_, held)| held == lease) {
            *current = None;
        }
    }
}

impl EtcdLockProvider {
    /// The lease of the bucket `now_ms` falls in, shared by every record written in it (by any
    /// instance with the same retention): read from its bucket key, or granted and published
    /// there. Its TTL outlasts the bucket by the retention, a backstop: the records go when a
    /// write's sweep revokes it ([`Self::sweep`]).
    pub(super) async fn bucket_lease(&self, now_ms: u64) -> Result<i64, EtcdError> {
        let retention = &self.retention;
        let index = now_ms / retention.bucket_ms;
        if let Some(lease) = retention.cached(index) {
            return Ok(lease);
        }
        let key = self.keys.bucket(retention.retention_ms(), index);
        let read = self.client.range(wire::RangeRequest::key(&key)).await?;
        if let Some(kv) = read.kvs.first().filter(|kv| kv.lease != 0) {
            retention.remember(index, kv.lease);
            return Ok(kv.lease);
        }
        let ttl = ttl_seconds(retention.keep_for + Duration::from_millis(retention.bucket_ms));
        let lease = self.client.grant(ttl).await?.id;
        let request = wire::TxnRequest {
            compare: vec![wire::created_at(&key, 0)],
            success: vec![wire::put(&key, Vec::new(), lease)],
            failure: vec![wire::get(&key)],
        };
        let response = self.client.txn_on_leases(request, &[lease]).await?;
        let lease = if response.succeeded {
            lease
        } else {
            // Another instance published the bucket's lease first: ours is revoked.
            match response.range(0).first() {
                Some(kv) if kv.lease != 0 => kv.lease,
                _ => return Err(EtcdError::Lease("the bucket's lease vanished".to_owned())),
            }
        };
        retention.remember(index, lease);
        Ok(lease)
    }

    /// The operation a write adds to its transaction to find the buckets whose oldest record
    /// has passed the retention (at most [`SWEEP_LIMIT`]); [`Self::sweep`] revokes them.
    pub(super) fn expired_buckets(&self, now_ms: u64) -> wire::RequestOp {
        let retention = &self.retention;
        let start = self.keys.buckets_of(retention.retention_ms());
        // Bucket b starts at b * bucket_ms; it has passed once that start is a retention old.
        let end = match now_ms.checked_sub(retention.retention_ms()) {
            Some(passed) => self
                .keys
                .bucket(retention.retention_ms(), passed / retention.bucket_ms + 1),
            None => start.clone(),
        };
        wire::range(wire::RangeRequest {
            keys_only: true,
            ..wire::RangeRequest::between(start, end, SWEEP_LIMIT)
        })
    }

    /// Revokes the leases of expired buckets (`expired`: what [`Self::expired_buckets`]
    /// found), deleting their records, index entries and bucket keys with them. Concurrent
    /// sweeps of other instances revoke the same leases: a lease already gone is no error.
    pub(super) async fn sweep(&self, expired: &[KeyValue]) {
        for kv in expired.iter().filter(|kv| kv.lease != 0) {
            self.retention.forget(kv.lease);
            if let Err(error) = self.client.revoke(kv.lease).await {
                tracing::debug!(lease = kv.lease, %error, "revoking an expired run bucket failed; the next write retries");
            }
        }
    }

    /// Deletes the oldest records of `lock` beyond `runs_per_lock` (with their index entries
    /// and heartbeats), as many as the lock's count past its bound in the same read. A run
    /// still alive (running, its heartbeat key present) is kept however old: deleting its
    /// record would stop a job that still runs; the next oldest goes instead.
    pub(super) async fn trim(&self, lock: &str) -> Result<(), EtcdError> {
        let start = self.keys.runs_of(lock);
        let end = wire::prefix_end(&start);
        let alive_start = self.keys.alive_of(lock);
        let per_lock = u64::from(self.retention.per_lock);
        loop {
            // The lock's records are bounded (runs_per_lock + slack), so etcd's reading the
            // whole range to sort it is too; the answer carries only the oldest.
            let read = self
                .client
                .read_txn(wire::TxnRequest {
                    compare: Vec::new(),
                    success: vec![
                        wire::range(wire::RangeRequest {
                            sort_order: wire::SORT_DESCEND,
                            ..wire::RangeRequest::between(start.clone(), end.clone(), TRIM_PAGE)
                        }),
                        wire::range(wire::RangeRequest::prefix(&alive_start, true)),
                    ],
                    failure: Vec::new(),
                })
                .await?;
            let alive: Vec<&[u8]> = read
                .range(1)
                .iter()
                .map(|kv| &kv.key[alive_start.len()..])
                .collect();
            let excess =
                usize::try_from(read.count(0).saturating_sub(per_lock)).unwrap_or(usize::MAX);
            let oldest = read.range(0);
            let mut success = Vec::new();
            let mut deleted = 0;
            for kv in oldest {
                if deleted == excess {
                    break;
                }
                if alive.contains(&&kv.key[start.len()..]) {
                    continue;
                }
                deleted += 1;
                success.push(wire::delete(&kv.key));
                // A value shedlock cannot read still goes; its index entry, if any, goes with
                // its bucket.
                if let Ok(record) = decode(kv) {
                    success.push(wire::delete(&self.keys.by_time(TimeKey {
                        lock: lock.into(),
                        started_us: to_us(record.started_at),
                        token: record.fencing_token,
                        attempt: record.attempt,
                    })));
                    success.push(wire::delete(&self.keys.alive(
                        lock,
                        record.fencing_token,
                        record.attempt,
                    )));
                }
            }
            if deleted == 0 {
                return Ok(());
            }
            self.client
                .txn(wire::TxnRequest {
                    compare: Vec::new(),
                    success,
                    failure: Vec::new(),
                })
                .await?;
            if deleted == excess || oldest.len() < TRIM_PAGE {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_a_sixty_fourth_of_the_retention_in_whole_seconds() {
        let bucket = |retention| Retention::new(retention, 5).unwrap().bucket_ms;
        assert_eq!(bucket(Duration::from_secs(2)), 1000);
        assert_eq!(bucket(Duration::from_secs(640)), 10_000);
        assert_eq!(bucket(Duration::from_secs(641)), 11_000);
        assert_eq!(
            bucket(shedlock_core::DEFAULT_RUN_RETENTION),
            14 * 24 * 3600 * 1000 / 64
        );
        assert!(Retention::new(Duration::from_millis(999), 5).is_err());
    }

    #[test]
    fn a_trim_is_due_past_half_the_slack() {
        let retention = Retention::new(Duration::from_secs(60), 5).unwrap();
        assert!(!retention.trim_due(5 + TRIM_AFTER));
        assert!(retention.trim_due(6 + TRIM_AFTER));
    }
}
