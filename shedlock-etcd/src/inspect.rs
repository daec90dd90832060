//! The read side: lock records as etcd holds them, and an operator's release.

use std::collections::HashSet;
use std::time::SystemTime;

use shedlock_core::async_trait;
use shedlock_core::{Error, LockInspector, LockQuery, LockRecord, Operation};

use crate::EtcdLockProvider;
use crate::provider::read_now;
use crate::record::{LockValue, from_ms, now_ms};
use crate::wire::{self, KeyValue, Request, RequestOp};

impl EtcdLockProvider {
    /// The record of `kv` (a `<prefix>locks/` key), held when its lease key or minimum-hold
    /// key exists: etcd's judgement, whatever the times say.
    fn record_of(
        &self,
        name: &str,
        kv: &KeyValue,
        held: bool,
        read_at: SystemTime,
    ) -> Result<LockRecord, Error> {
        let value = self.decode(Operation::Read, name, kv)?;
        let mut record = LockRecord::new(
            name,
            value.holder.clone(),
            from_ms(value.locked_at_ms),
            from_ms(value.lock_until_ms),
            value.token_at(kv.mod_revision),
            read_at,
        );
        record.held = held;
        if held && record.lock_until <= read_at {
            // Held past the recorded end: etcd's leases are whole seconds and the
            // minimum hold outlives the lease; the lease's end is etcd's to tell, not ours.
            record.lock_until = read_at + std::time::Duration::from_millis(1);
        }
        Ok(record)
    }
}

fn range_op(key: Vec<u8>, range_end: Vec<u8>, limit: i64, keys_only: bool) -> RequestOp {
    RequestOp {
        request: Some(Request::Range(wire::RangeRequest {
            key,
            range_end,
            limit,
            keys_only,
            ..wire::RangeRequest::default()
        })),
    }
}

#[async_trait]
impl LockInspector for EtcdLockProvider {
    async fn lock_record(&self, name: &str) -> Result<Option<LockRecord>, Error> {
        let response = self
            .client
            .read_txn(wire::TxnRequest {
                compare: Vec::new(),
                success: vec![
                    wire::get(&self.keys.lock(name)),
                    wire::get(&self.keys.held(name)),
                    wire::get(&self.keys.least(name)),
                ],
                failure: Vec::new(),
            })
            .await
            .map_err(|e| e.into_store(Operation::Read, name))?;
        let read_at = read_now();
        let Some(kv) = response.range(0).first() else {
            return Ok(None);
        };
        let held = !response.range(1).is_empty() || !response.range(2).is_empty();
        self.record_of(name, kv, held, read_at).map(Some)
    }

    async fn list_locks(&self, query: &LockQuery) -> Result<Vec<LockRecord>, Error> {
        let locks = self.keys.section("locks");
        let start = match (&query.after, &query.prefix) {
            (Some(after), _) => {
                let mut key = self.keys.lock(after);
                key.push(0);
                key
            }
            (None, Some(prefix)) => self.keys.lock(prefix),
            (None, None) => locks.clone(),
        };
        let end = match &query.prefix {
            Some(prefix) => wire::prefix_end(&self.keys.lock(prefix)),
            None => wire::prefix_end(&locks),
        };
        if start >= end {
            return Ok(Vec::new());
        }
        let limit = query
            .limit
            .map_or(0, |limit| i64::try_from(limit).unwrap_or(i64::MAX));
        if query.limit == Some(0) {
            return Ok(Vec::new());
        }
        let held = self.keys.section("held");
        let least = self.keys.section("least");
        let response = self
            .client
            .read_txn(wire::TxnRequest {
                compare: Vec::new(),
                success: vec![
                    range_op(start, end, limit, false),
                    range_op(held.clone(), wire::prefix_end(&held), 0, true),
                    range_op(least.clone(), wire::prefix_end(&least), 0, true),
                ],
                failure: Vec::new(),
            })
            .await
            .map_err(|e| e.into_store(Operation::Read, self.keys.prefix()))?;
        let read_at = read_now();
        let held: HashSet<&str> = response
            .range(1)
            .iter()
            .filter_map(|kv| self.keys.name_in("held", &kv.key))
            .chain(
                response
                    .range(2)
                    .iter()
                    .filter_map(|kv| self.keys.name_in("least", &kv.key)),
            )
            .collect();
        let mut records = Vec::new();
        for kv in response.range(0) {
            let Some(name) = self.keys.name_in("locks", &kv.key) else {
                continue;
            };
            records.push(self.record_of(name, kv, held.contains(name), read_at)?);
        }
        Ok(query.apply(records))
    }

    /// This instance's clock: etcd has no clock to read. Whether a lock is held never
    /// depends on it (see [`LockRecord::held`]).
    async fn store_time(&self) -> Result<SystemTime, Error> {
        Ok(read_now())
    }

    async fn release_lock(&self, record: &LockRecord) -> Result<bool, Error> {
        let (name, holder, fencing_token) = (&*record.name, &*record.holder, record.fencing_token);
        let fail = |e: crate::error::EtcdError| e.into_store(Operation::Release, name);
        let (lock_key, held_key) = (self.keys.lock(name), self.keys.held(name));
        let Ok(token) = i64::try_from(fencing_token) else {
            return Ok(false);
        };
        // The record is rewritten (lock_until now), so read it first and write only what
        // was read.
        let read = self
            .client
            .range(wire::RangeRequest::key(&lock_key))
            .await
            .map_err(fail)?;
        let Some(kv) = read.kvs.first() else {
            return Ok(false);
        };
        let value = self.decode(Operation::Release, name, kv)?;
        let ended = LockValue {
            token: Some(value.token_at(kv.mod_revision)),
            lock_until_ms: now_ms().min(value.lock_until_ms),
            ..value
        };
        let response = self
            .client
            .txn(wire::TxnRequest {
                compare: vec![
                    wire::created_at(&held_key, token),
                    wire::value_is(&held_key, holder.as_bytes()),
                    wire::modified_at(&lock_key, kv.mod_revision),
                ],
                success: vec![
                    wire::get(&held_key),
                    wire::delete(&held_key),
                    wire::delete(&self.keys.least(name)),
                    wire::put(&lock_key, ended.encode(), 0),
                ],
                failure: Vec::new(),
            })
            .await
            .map_err(fail)?;
        if !response.succeeded {
            return Ok(false);
        }
        if let Some(kv) = response.range(0).first() {
            self.client.revoke_later(kv.lease);
        }
        Ok(true)
    }
}
