//! Run records beside the locks.
//!
//! - `<prefix>run/<lock>/<id>`: a lock's records, JSON. The id is the fencing token and
//!   attempt, inverted, so a lock's keys sort newest first and a page is a limited range.
//! - `<prefix>run-time/<start>-<id>-<lock>`: one empty key per record, every lock's runs by
//!   start time, newest first: what a read across locks ranges over.
//! - `<prefix>run-alive/<lock>/<id>`: a running run's heartbeat, on an etcd lease of the run's
//!   heartbeat lease; it exists while the run may still run.
//! - `<prefix>run-leases/<retention>/<bucket>`: the lease every record (and index key) written
//!   in that time bucket lives on.
//!
//! Per lock the order is the fencing token's, then the attempt's: the order in which etcd
//! granted the leases the runs started under, which is the order they started in (a lease is
//! granted only after the one before ended). Started-at times come from the instances' clocks;
//! when those agree it is the same order as [`RunCursor`](shedlock_core::RunCursor)'s. A
//! `before` cursor pages a lock from its token and attempt, so pages never skip or repeat.

mod keep;
mod read;
#[cfg(test)]
mod tests;
mod value;

use std::time::{Duration, SystemTime};

use shedlock_core::async_trait;
use shedlock_core::{Error, Operation, RunEnd, RunLog, RunOutcome, RunQuery, RunRecord, RunStart};

pub(crate) use keep::Retention;
use value::{decode, encode};

use crate::EtcdLockProvider;
use crate::error::EtcdError;
use crate::names::{TimeKey, ttl_seconds};
use crate::record::{from_ms, from_us, now_ms, now_us, to_ms, to_us};
use crate::wire::{self, KeyValue};

/// A heartbeat key's lease, granted for a run: its id and TTL in whole seconds (the key's
/// value, so that a longer heartbeat gets a new lease).
#[derive(Debug, Clone, Copy)]
struct Heartbeat {
    lease: i64,
    ttl: i64,
}

/// `time` rounded up to a whole millisecond, as records keep it: a heartbeat's deadline is
/// never read back earlier than written.
fn ceil_ms(time: SystemTime) -> SystemTime {
    let floor = from_ms(to_ms(time));
    if floor < time {
        floor + Duration::from_millis(1)
    } else {
        floor
    }
}

impl EtcdLockProvider {
    fn runs_error(&self, lock: &str) -> impl Fn(EtcdError) -> Error + '_ {
        let lock = lock.to_owned();
        move |error| error.into_store(Operation::Runs, &lock)
    }

    async fn grant_heartbeat(&self, lease: Duration) -> Result<Heartbeat, EtcdError> {
        self.grant_ttl(ttl_seconds(lease)).await
    }

    async fn grant_ttl(&self, ttl: i64) -> Result<Heartbeat, EtcdError> {
        let granted = self.client.grant(ttl).await?;
        Ok(Heartbeat {
            lease: granted.id,
            ttl,
        })
    }

    /// Writes `record` (new: its key must be absent) with its index entry on the current
    /// bucket's lease, and its heartbeat key on `heartbeat` if given; then revokes expired
    /// buckets and trims the lock if its count asks for it. Returns the record already there,
    /// if any (and writes nothing).
    async fn create_run(
        &self,
        record: &RunRecord,
        heartbeat: Option<Heartbeat>,
    ) -> Result<Option<KeyValue>, EtcdError> {
        let lock = record.lock.as_str();
        let key = self.keys.run(lock, record.fencing_token, record.attempt);
        let now = now_ms();
        let mut heartbeat = heartbeat;
        let mut retried = false;
        let (response, counted) = loop {
            let bucket = match self.bucket_lease(now).await {
                Ok(bucket) => bucket,
                Err(error) => {
                    heartbeat.inspect(|h| self.client.revoke_later(h.lease));
                    return Err(error);
                }
            };
            let mut success = vec![
                wire::put(&key, encode(record), bucket),
                wire::put(
                    &self.keys.by_time(TimeKey {
                        lock: lock.into(),
                        started_us: to_us(record.started_at),
                        token: record.fencing_token,
                        attempt: record.attempt,
                    }),
                    Vec::new(),
                    bucket,
                ),
            ];
            if let Some(heartbeat) = heartbeat {
                success.push(wire::put(
                    &self.keys.alive(lock, record.fencing_token, record.attempt),
                    heartbeat.ttl.to_string().into_bytes(),
                    heartbeat.lease,
                ));
            }
            let counted = success.len();
            success.push(wire::range(wire::RangeRequest {
                count_only: true,
                ..wire::RangeRequest::prefix(&self.keys.runs_of(lock), true)
            }));
            success.push(self.expired_buckets(now));
            let request = wire::TxnRequest {
                compare: vec![wire::created_at(&key, 0)],
                success,
                failure: vec![wire::get(&key)],
            };
            let leases = heartbeat.map(|h| h.lease);
            match self.client.txn_on_leases(request, leases.as_slice()).await {
                // The bucket's lease was revoked under this instance (a sweep of an instance
                // whose clock is ahead): once more on a new one, and a new heartbeat lease
                // (the failed transaction's is revoked).
                Err(error) if error.is_lease_not_found() && !retried => {
                    self.retention.forget(bucket);
                    retried = true;
                    if let Some(old) = heartbeat {
                        heartbeat = Some(self.grant_ttl(old.ttl).await?);
                    }
                }
                other => break (other?, counted),
            }
        };
        if !response.succeeded {
            return Ok(response.range(0).first().cloned());
        }
        self.sweep(response.range(counted + 1)).await;
        if self.retention.trim_due(response.count(counted))
            && let Err(error) = self.trim(lock).await
        {
            tracing::debug!(%lock, %error, "trimming run records failed; the lock's next run retries");
        }
        Ok(None)
    }
}

#[async_trait]
impl RunLog for EtcdLockProvider {
    async fn run_started(&self, start: &RunStart) -> Result<RunRecord, Error> {
        let fail = self.runs_error(&start.lock);
        let mut record = RunRecord::started(start, from_us(now_us()));
        record.alive_until = record.alive_until.map(ceil_ms);
        let heartbeat = match start.lease {
            Some(lease) => Some(self.grant_heartbeat(lease).await.map_err(&fail)?),
            None => None,
        };
        match self.create_run(&record, heartbeat).await.map_err(&fail)? {
            None => Ok(record),
            Some(existing) => decode(&existing).map_err(fail),
        }
    }

    async fn run_finished(&self, start: &RunStart, end: &RunEnd) -> Result<(), Error> {
        let fail = self.runs_error(&start.lock);
        let key = self
            .keys
            .run(&start.lock, start.fencing_token, start.attempt);
        let alive = self
            .keys
            .alive(&start.lock, start.fencing_token, start.attempt);
        // A compare-and-set on the record; a concurrent first end wins, and a record that
        // appears or goes meanwhile is read again.
        for _ in 0..3 {
            let read = self
                .client
                .range(wire::RangeRequest::key(&key))
                .await
                .map_err(&fail)?;
            let now = from_us(now_us());
            let Some(kv) = read.kvs.first() else {
                let whole = RunRecord::started(start, now).finished(end, now);
                match self.create_run(&whole, None).await.map_err(&fail)? {
                    None => return Ok(()),
                    Some(_) => continue,
                }
            };
            let record = decode(kv).map_err(&fail)?;
            if record.outcome != RunOutcome::Running {
                return Ok(());
            }
            let finished = record.finished(end, now);
            let request = wire::TxnRequest {
                compare: vec![wire::modified_at(&key, kv.mod_revision)],
                success: vec![
                    wire::put(&key, encode(&finished), kv.lease),
                    wire::get(&alive),
                    wire::delete(&alive),
                    self.expired_buckets(to_ms(now)),
                ],
                failure: Vec::new(),
            };
            let response = match self.client.txn(request).await {
                Ok(response) => response,
                // The record's bucket was revoked meanwhile: the record went with it.
                Err(error) if error.is_lease_not_found() => continue,
                Err(error) => return Err(fail(error)),
            };
            if response.succeeded {
                if let Some(heartbeat) = response.range(1).first() {
                    self.client.revoke_later(heartbeat.lease);
                }
                self.sweep(response.range(3)).await;
                return Ok(());
            }
        }
        Ok(())
    }

    async fn run_alive(&self, start: &RunStart, lease: Duration) -> Result<bool, Error> {
        let fail = self.runs_error(&start.lock);
        let key = self
            .keys
            .run(&start.lock, start.fencing_token, start.attempt);
        let alive_key = self
            .keys
            .alive(&start.lock, start.fencing_token, start.attempt);
        let read = self
            .client
            .read_txn(wire::TxnRequest {
                compare: Vec::new(),
                success: vec![wire::get(&key), wire::get(&alive_key)],
                failure: Vec::new(),
            })
            .await
            .map_err(&fail)?;
        let Some(kv) = read.range(0).first() else {
            return Ok(false);
        };
        let record = decode(kv).map_err(&fail)?;
        if record.outcome != RunOutcome::Running {
            return Ok(false);
        }
        let now = now_ms();
        let alive = read.range(1).first();
        let wanted = ttl_seconds(lease);
        // Which lease the heartbeat key is on after the renewal, and whether it is new.
        let (heartbeat, granted) = match (alive, record.alive_until) {
            (Some(alive), Some(until)) => {
                if to_ms(until) <= now {
                    // Passed on this instance's clock: ended for everyone now, so that no
                    // instance sees it go on after its runner stopped.
                    self.client.revoke(alive.lease).await.map_err(&fail)?;
                    return Ok(false);
                }
                let ttl = std::str::from_utf8(&alive.value)
                    .ok()
                    .and_then(|ttl| ttl.parse::<i64>().ok())
                    .unwrap_or_default();
                if wanted > ttl {
                    (self.grant_heartbeat(lease).await.map_err(&fail)?, true)
                } else {
                    // Renewed before the record says so: etcd's lease, not the record, is what
                    // other instances go by.
                    if self
                        .client
                        .keep_alive_once(alive.lease)
                        .await
                        .map_err(&fail)?
                        <= 0
                    {
                        return Ok(false);
                    }
                    (
                        Heartbeat {
                            lease: alive.lease,
                            ttl,
                        },
                        false,
                    )
                }
            }
            // Its heartbeat ran out (its lease ended): passed.
            (None, Some(_)) => return Ok(false),
            // A run recorded without a heartbeat counts as live: it gets one now.
            (_, None) => (self.grant_heartbeat(lease).await.map_err(&fail)?, true),
        };
        // The record and its index entry move to the current bucket's lease: a run that still
        // runs is never deleted with its start's bucket, however long it runs.
        let bucket = match self.bucket_lease(now).await {
            Ok(bucket) => bucket,
            Err(error) => {
                if granted {
                    self.client.revoke_later(heartbeat.lease);
                }
                return Err(fail(error));
            }
        };
        let index_key = self.keys.by_time(TimeKey {
            lock: start.lock.as_str().into(),
            started_us: to_us(record.started_at),
            token: record.fencing_token,
            attempt: record.attempt,
        });
        let mut renewed = record;
        renewed.alive_until = Some(ceil_ms(from_ms(now) + lease));
        let alive_compare = match alive {
            Some(alive) => wire::modified_at(&alive_key, alive.mod_revision),
            None => wire::created_at(&alive_key, 0),
        };
        let request = wire::TxnRequest {
            compare: vec![wire::modified_at(&key, kv.mod_revision), alive_compare],
            success: vec![
                wire::put(&key, encode(&renewed), bucket),
                wire::put(&index_key, Vec::new(), bucket),
                wire::put(
                    &alive_key,
                    heartbeat.ttl.to_string().into_bytes(),
                    heartbeat.lease,
                ),
            ],
            failure: Vec::new(),
        };
        let new_leases = if granted {
            vec![heartbeat.lease]
        } else {
            Vec::new()
        };
        let response = match self.client.txn_on_leases(request, &new_leases).await {
            Ok(response) => response,
            Err(error) => {
                if error.is_lease_not_found() {
                    self.retention.forget(bucket);
                }
                return Err(fail(error));
            }
        };
        if response.succeeded
            && granted
            && let Some(old) = alive
        {
            self.client.revoke_later(old.lease);
        }
        Ok(response.succeeded)
    }

    async fn runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        let what = query.lock.as_deref().unwrap_or(self.keys.prefix());
        let fail = self.runs_error(what);
        match &query.lock {
            Some(lock) => self.runs_of_lock(lock, query).await,
            None => self.runs_of_every_lock(query).await,
        }
        .map_err(fail)
    }
}
