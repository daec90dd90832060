//! One acquisition in steps, shared by `acquire` and `acquire_many`: what it reads first
//! (`reads`) and the decision on it (`decide`), its etcd leases (`grant_leases`), the
//! transaction that grants it (`attempt`), and the lease from that transaction's answer
//! (`finish`).

use std::sync::Arc;

use shedlock_core::{Error, LockConfiguration, LockLease, Operation};

use crate::EtcdLockProvider;
use crate::provider::unreadable;
use crate::record::{LockValue, decode_tick, encode_tick, from_ms, ms, now_ms};
use crate::wire::{self, KeyValue};

impl EtcdLockProvider {
    /// From a refused acquire's reads (held key, minimum-hold key, record): the minimum-hold
    /// key and the record's revision when the lock is free but for a minimum hold that the
    /// record says ended (its `lock_until`, written by the release, has passed on this
    /// instance's clock) and that belongs to the acquisition the record describes.
    fn ended_minimum_hold(
        &self,
        name: &str,
        refused: &wire::TxnResponse,
    ) -> Result<Option<(KeyValue, i64)>, Error> {
        let (held, least, record) = (refused.range(0), refused.range(1), refused.range(2));
        let (true, Some(least), Some(record)) = (held.is_empty(), least.first(), record.first())
        else {
            return Ok(None);
        };
        let value = self.decode(Operation::Acquire, name, record)?;
        let same_acquisition =
            i64::try_from(value.token_at(record.mod_revision)) == Ok(least.create_revision);
        let over = value.lock_until_ms <= now_ms();
        Ok((same_acquisition && over).then(|| (least.clone(), record.mod_revision)))
    }

    /// What an acquisition for `config` reads before its grant, if anything: the record, for
    /// `unless_acquired_within`, and the last tick granted, for a tick (read by
    /// [`decide`](Self::decide)).
    pub(crate) fn reads(&self, config: &LockConfiguration) -> Vec<wire::RequestOp> {
        if config.acquired_within_window().is_zero() && config.tick().is_none() {
            return Vec::new();
        }
        let name = config.name();
        vec![
            wire::get(&self.keys.lock(name)),
            wire::get(&self.keys.tick(name)),
        ]
    }

    /// What an acquisition for `config` reads before its grant (see [`reads`](Self::reads)), in
    /// one round trip when it needs any, decided.
    pub(crate) async fn read_first(
        &self,
        config: &LockConfiguration,
    ) -> Result<Option<Read>, Error> {
        let success = self.reads(config);
        if success.is_empty() {
            return Ok(Some(Read::default()));
        }
        let read = self
            .client
            .read_txn(wire::TxnRequest {
                compare: Vec::new(),
                success,
                failure: Vec::new(),
            })
            .await
            .map_err(self.fail(Operation::Acquire, config.name()))?;
        self.decide(config, read.range(0), read.range(1))
    }

    /// An acquisition for `config` on what [`reads`](Self::reads) read (the record, the last
    /// tick; nothing when it reads nothing). `Ok(None)`: refused; otherwise the compares that
    /// keep it as read until the grant, and the write that keeps the tick.
    pub(crate) fn decide(
        &self,
        config: &LockConfiguration,
        record: &[KeyValue],
        last_tick: &[KeyValue],
    ) -> Result<Option<Read>, Error> {
        let (window, tick) = (config.acquired_within_window(), config.tick());
        let name = config.name();
        let (lock_key, tick_key) = (self.keys.lock(name), self.keys.tick(name));
        // Both are decisions on this instance's clock: etcd has no clock to read.
        let now = now_ms();
        let mut compare = Vec::new();
        if !window.is_zero() {
            let last = match record.first() {
                Some(kv) => {
                    let value = self.decode(Operation::Acquire, name, kv)?;
                    if value.locked_at_ms.saturating_add(ms(window)) > now {
                        return Ok(None);
                    }
                    kv.mod_revision
                }
                None => 0,
            };
            compare.push(wire::modified_at(&lock_key, last));
        }
        let Some(tick) = tick else {
            return Ok(Some(Read {
                compare,
                tick_write: None,
            }));
        };
        let (last, revision) = match last_tick.first() {
            Some(kv) => {
                let last = decode_tick(&kv.value)
                    .map_err(|reason| unreadable(Operation::Acquire, name, kv, reason))?;
                (Some(last), kv.mod_revision)
            }
            None => (None, 0),
        };
        if !tick.follows(last, from_ms(now)) {
            return Ok(None);
        }
        compare.push(wire::modified_at(&tick_key, revision));
        let tick_write = Some(wire::put(&tick_key, encode_tick(tick.millis()), 0));
        Ok(Some(Read {
            compare,
            tick_write,
        }))
    }

    /// The leases an acquisition for `config` puts its keys on: `lock_at_most_for`'s (its id
    /// and its length as granted, in ms) and `lock_at_least_for`'s (0: none), granted at once.
    /// If one fails, the other is revoked.
    pub(crate) async fn grant_leases(&self, config: &LockConfiguration) -> Result<Leases, Error> {
        let name = config.name();
        let (at_most, at_least) = (config.lock_at_most_for(), config.lock_at_least_for());
        let (lease, least) =
            tokio::join!(self.grant_for(Operation::Acquire, name, at_most), async {
                if at_least.is_zero() {
                    Ok(0)
                } else {
                    self.grant(Operation::Acquire, name, at_least).await
                }
            });
        match (lease, least) {
            (Ok((lease, lease_ms)), Ok(least)) => Ok(Leases {
                lease,
                lease_ms,
                least,
            }),
            (lease, least) => {
                let granted = [
                    lease.as_ref().ok().map(|l| l.0),
                    least.as_ref().ok().copied(),
                ];
                for id in granted.into_iter().flatten() {
                    self.client.revoke_later(id);
                }
                Err(lease.map(drop).and(least).unwrap_err())
            }
        }
    }

    /// The transaction that grants `config` on `read` with `leases`, `locked_at` read before
    /// they were granted.
    pub(crate) fn attempt(
        &self,
        config: &LockConfiguration,
        read: Read,
        locked_at: u64,
        leases: Leases,
    ) -> Attempt {
        let name = config.name();
        let (lock_key, held_key, least_key) = (
            self.keys.lock(name),
            self.keys.held(name),
            self.keys.least(name),
        );
        // Held key absent, minimum-hold key absent (and the record and the last tick as read).
        let mut compare = vec![
            wire::created_at(&held_key, 0),
            wire::created_at(&least_key, 0),
        ];
        compare.extend(read.compare);
        let lock_until = locked_at.saturating_add(leases.lease_ms);
        let value = LockValue {
            holder: self.holder.to_string(),
            token: None,
            locked_at_ms: locked_at,
            lock_until_ms: lock_until,
        };
        let mut success = vec![
            wire::put(&held_key, self.holder.as_bytes().to_vec(), leases.lease),
            wire::put(&lock_key, value.encode(), 0),
        ];
        success.extend(read.tick_write);
        if leases.least != 0 {
            success.push(wire::put(&least_key, Vec::new(), leases.least));
        }
        Attempt {
            keys: [lock_key, held_key, least_key],
            compare,
            success,
            leases,
            locked_at,
            lock_until,
        }
    }

    /// The lease `attempt` granted, from its transaction's `response`; a refusal only for a
    /// minimum hold that ended is tried once more (see `ended_minimum_hold`). Its leases are
    /// revoked unless it was granted.
    pub(crate) async fn finish(
        &self,
        config: &LockConfiguration,
        attempt: Attempt,
        mut response: Result<wire::TxnResponse, Error>,
    ) -> Result<Option<LockLease>, Error> {
        let name = config.name();
        let Attempt {
            keys: [lock_key, _, least_key],
            mut compare,
            mut success,
            leases,
            locked_at,
            lock_until,
        } = attempt;
        if let Ok(refused) = &response
            && !refused.succeeded
            && let Some((ended, record)) = self.ended_minimum_hold(name, refused)?
        {
            // The lock is free but for a minimum hold its record says is over (its holder
            // did not end it: paused or gone after release): taken in one transaction that
            // checks both keys are as read.
            compare[1] = wire::created_at(&least_key, ended.create_revision);
            // Beside the window's compare, if any: both must hold.
            compare.push(wire::modified_at(&lock_key, record));
            if leases.least == 0 {
                success.push(wire::delete(&least_key));
            }
            let request = wire::TxnRequest {
                compare,
                success,
                failure: Vec::new(),
            };
            response = self
                .client
                .txn(request)
                .await
                .map_err(self.fail(Operation::Acquire, name));
            if matches!(&response, Ok(taken) if taken.succeeded) {
                self.client.revoke_later(ended.lease);
            }
        }
        let response = match response {
            Ok(response) if response.succeeded => response,
            other => {
                self.client.revoke_later(leases.lease);
                self.client.revoke_later(leases.least);
                return other.map(|_| None);
            }
        };
        let token = u64::try_from(response.revision()).unwrap_or_default();
        Ok(Some(LockLease::new(
            config,
            Arc::clone(&self.holder),
            token,
            from_ms(locked_at),
            from_ms(lock_until),
        )))
    }
}

/// What an acquisition read keeps: compares that hold it as read until the grant, and the
/// write that keeps its tick.
#[derive(Debug, Default)]
pub(crate) struct Read {
    compare: Vec<wire::Compare>,
    tick_write: Option<wire::RequestOp>,
}

/// The etcd leases of one acquisition (see [`EtcdLockProvider::grant_leases`]).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Leases {
    lease: i64,
    lease_ms: u64,
    least: i64,
}

/// One acquisition's transaction, before it is sent (see [`EtcdLockProvider::attempt`]).
#[derive(Debug)]
pub(crate) struct Attempt {
    /// The record, held and minimum-hold keys.
    keys: [Vec<u8>; 3],
    compare: Vec<wire::Compare>,
    success: Vec<wire::RequestOp>,
    leases: Leases,
    locked_at: u64,
    lock_until: u64,
}

impl Attempt {
    /// The transaction: on refusal, it reads the held key, the minimum-hold key and the
    /// record (what `ended_minimum_hold` looks at).
    pub(crate) fn request(&self) -> wire::TxnRequest {
        let [lock_key, held_key, least_key] = &self.keys;
        wire::TxnRequest {
            compare: self.compare.clone(),
            success: self.success.clone(),
            failure: vec![
                wire::get(held_key),
                wire::get(least_key),
                wire::get(lock_key),
            ],
        }
    }
}
