//! `EtcdLockProvider`: the lock contract on etcd leases and transactions.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use shedlock_core::async_trait;
use shedlock_core::{
    Error, LockConfiguration, LockInspector, LockLease, LockProvider, Operation, RunLog,
};

use crate::EtcdElector;
use crate::builder::EtcdLockProviderBuilder;
use crate::client::Client;
use crate::error::EtcdError;
use crate::hints::Hints;
use crate::names::{Keys, ttl_seconds};
use crate::record::{LockValue, from_ms, ms, now_ms, to_ms};
use crate::runs::Retention;
use crate::wire::{self, KeyValue};

/// Locks as etcd keys held by etcd leases, with the cluster's revision as fencing token.
///
/// A lock is held while its key `<prefix>held/<name>` exists. Each acquisition grants an etcd
/// lease of `lock_at_most_for` (whole seconds, rounded up) and creates that key with the lease
/// in one transaction that requires the key to be absent, so the lease runs out on etcd's
/// clock and etcd deletes the key then: whether a lock is free is etcd's judgement alone,
/// never an instance's clock. `lock_at_least_for` is a second key, `<prefix>least/<name>`,
/// on a lease of that length, which acquisitions require absent too and a release deletes
/// when the minimum hold has passed (at once, or in the background when that time comes). The lock's record, `<prefix>locks/<name>`, keeps the last holder, token and times
/// after release, for inspection and for
/// [`unless_acquired_within`](LockConfiguration::unless_acquired_within).
///
/// The fencing token is the revision of the transaction that granted the lease: etcd's
/// revision counts every write to the cluster and never goes back, so tokens strictly
/// increase per lock (and across locks), also after a key is deleted by hand or compacted.
/// Release and extend require the held key's create revision to be that token.
///
/// A claim for a tick ([`for_tick`](LockConfiguration::for_tick)) reads the last tick granted,
/// `<prefix>ticks/<name>`, and is refused unless the tick follows it by its spacing and lies no
/// further ahead than it allows of this instance's clock (etcd has none: the same clock the
/// lease's `lock_until` is read from); the granting transaction requires that key as read and
/// writes the tick there. The key is on no lease and nothing else writes it, so a tick stays
/// granted after its lease ends, released or expired.
///
/// | operation | round trips |
/// |---|---|
/// | acquire | 2: lease grant, transaction (3 with `unless_acquired_within` or a tick: a read first; a refused acquire revokes its lease in the background) |
/// | release | 1 transaction (the lease is revoked in the background; a `lock_at_least_for` still running is ended by a background transaction when it has passed) |
/// | extend | 2: lease grant, transaction (the old lease revoked in the background) |
/// | acquire_many | as acquire, for every lock at once: a read transaction per 64 locks (for those that read), a lease grant per lock, a transaction per 100 locks (a nested one per lock); see the crate docs, "Batches" |
///
/// Every request is bounded by the request timeout (default 5 s): without a quorum an
/// operation fails with [`Error::Store`] instead of waiting.
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_core::{LockConfiguration, LockProvider};
/// use shedlock_etcd::EtcdLockProvider;
///
/// # async fn run() -> Result<(), shedlock_core::Error> {
/// let provider = EtcdLockProvider::connect("http://etcd1:2379,http://etcd2:2379").await?;
/// let config = LockConfiguration::new("nightly_report", Duration::from_secs(600), Duration::ZERO)?;
/// if let Some(lease) = provider.acquire(&config).await? {
///     println!("running with fencing token {}", lease.fencing_token());
///     provider.release(&lease).await?;
/// }
/// # Ok(())
/// # }
/// ```
///
/// Clones share the connection.
#[derive(Debug, Clone)]
pub struct EtcdLockProvider {
    pub(crate) client: Client,
    pub(crate) keys: Arc<Keys>,
    pub(crate) holder: Arc<str>,
    pub(crate) hints: Arc<Hints>,
    pub(crate) retention: Retention,
}

impl EtcdLockProvider {
    /// Connects to the cluster (`http://host:2379`, several separated by commas) with key
    /// prefix `shedlock/`, holding as [`default_holder()`](shedlock_core::default_holder).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`endpoints`) for an endpoint that is not a URL;
    /// [`Error::Store`] when no member answers within the request timeout.
    pub async fn connect(endpoints: &str) -> Result<Self, Error> {
        Self::builder(endpoints).connect().await
    }

    /// Configures prefix, holder, credentials, TLS, timeouts and run retention; see
    /// [`EtcdLockProviderBuilder`].
    pub fn builder(endpoints: impl Into<String>) -> EtcdLockProviderBuilder {
        EtcdLockProviderBuilder::new(endpoints.into())
    }

    /// The same cluster and connection acting as another holder (another instance).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`holder`) when empty, longer than 255 characters or holding
    /// control characters.
    pub fn with_holder(&self, holder: impl Into<String>) -> Result<Self, Error> {
        let holder = holder.into();
        shedlock_core::validate_holder(&holder)?;
        Ok(EtcdLockProvider {
            holder: holder.into(),
            ..self.clone()
        })
    }

    /// The same cluster, connection, prefix and holder, keeping run records for `retention`
    /// and `runs_per_lock` per lock (see
    /// [`run_retention`](EtcdLockProviderBuilder::run_retention)).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`run_retention`, `runs_per_lock`) as the builder checks them.
    pub fn with_run_retention(
        &self,
        retention: Duration,
        runs_per_lock: u32,
    ) -> Result<Self, Error> {
        Ok(EtcdLockProvider {
            retention: Retention::new(retention, runs_per_lock)?,
            ..self.clone()
        })
    }

    /// The prefix of every key this provider writes.
    pub fn prefix(&self) -> &str {
        self.keys.prefix()
    }

    /// An elector on the same cluster, prefix and holder, for
    /// the runtime's `LeaderElection` and leader-only jobs: candidates
    /// under `<prefix>elections/<election>/`, each on an etcd lease of its own.
    pub fn elector(&self) -> EtcdElector {
        EtcdElector::from_parts(
            self.client.clone(),
            Arc::clone(&self.keys),
            Arc::clone(&self.holder),
        )
    }

    pub(crate) fn fail(
        &self,
        operation: Operation,
        lock: &str,
    ) -> impl Fn(EtcdError) -> Error + '_ {
        let lock = lock.to_owned();
        move |error| error.into_store(operation, &lock)
    }

    /// Decodes a record key, or fails naming it.
    pub(crate) fn decode(
        &self,
        operation: Operation,
        lock: &str,
        kv: &KeyValue,
    ) -> Result<LockValue, Error> {
        LockValue::decode(&kv.value).map_err(|reason| unreadable(operation, lock, kv, reason))
    }

    /// Grants a lease of `duration` (rounded up to whole seconds).
    pub(crate) async fn grant(
        &self,
        operation: Operation,
        lock: &str,
        duration: Duration,
    ) -> Result<i64, Error> {
        Ok(self.grant_for(operation, lock, duration).await?.0)
    }

    /// Grants a lease of `duration` (rounded up to whole seconds); returns its id and its
    /// length as etcd granted it (raised to etcd's minimum TTL), in milliseconds: what the
    /// lease's `lock_until` counts, since etcd holds the lock that long.
    pub(crate) async fn grant_for(
        &self,
        operation: Operation,
        lock: &str,
        duration: Duration,
    ) -> Result<(i64, u64), Error> {
        let response = self
            .client
            .grant(ttl_seconds(duration))
            .await
            .map_err(self.fail(operation, lock))?;
        let granted = u64::try_from(response.ttl)
            .unwrap_or_default()
            .saturating_mul(1000);
        Ok((response.id, granted.max(ms(duration))))
    }

    /// Applies `ops` in one transaction if `lease` still holds its lock (its held key was
    /// created at its fencing token), with `leases` granted for them (revoked if it fails);
    /// then revokes the held key's lease as it was before, in the background. `Ok(false)`:
    /// the lease no longer holds the lock, and nothing changed.
    async fn while_held(
        &self,
        operation: Operation,
        lease: &LockLease,
        ops: Vec<wire::RequestOp>,
        leases: &[i64],
    ) -> Result<bool, Error> {
        let held_key = self.keys.held(lease.name());
        let mut success = vec![wire::get(&held_key)];
        success.extend(ops);
        let request = wire::TxnRequest {
            compare: vec![wire::created_at(&held_key, token_revision(lease))],
            success,
            failure: Vec::new(),
        };
        let response = self
            .client
            .txn_on_leases(request, leases)
            .await
            .map_err(self.fail(operation, lease.name()))?;
        if !response.succeeded {
            return Ok(false);
        }
        if let Some(kv) = response.range(0).first() {
            self.client.revoke_later(kv.lease);
        }
        Ok(true)
    }
}

#[async_trait]
impl LockProvider for EtcdLockProvider {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        let Some(read) = self.read_first(config).await? else {
            return Ok(None);
        };
        // Read before the grant: etcd's lease starts later, so it ends no earlier than this
        // lease's lock_until.
        let locked_at = now_ms();
        let leases = self.grant_leases(config).await?;
        let attempt = self.attempt(config, read, locked_at, leases);
        let response = self.client.txn(attempt.request()).await;
        let response = response.map_err(self.fail(Operation::Acquire, config.name()));
        self.finish(config, attempt, response).await
    }

    async fn acquire_many(
        &self,
        configs: &[LockConfiguration],
    ) -> Vec<Result<Option<LockLease>, Error>> {
        self.acquire_batch(configs).await
    }

    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        let name = lease.name();
        let now = now_ms();
        let least_until = to_ms(lease.locked_at()).saturating_add(ms(lease.lock_at_least_for()));
        let value = LockValue::of_lease(lease, now.max(least_until));
        let least_key = self.keys.least(name);
        let mut ops = vec![
            wire::delete(&self.keys.held(name)),
            wire::put(&self.keys.lock(name), value.encode(), 0),
        ];
        // The minimum-hold key is this acquisition's (the held key still is): when the
        // minimum hold has passed, it goes too, whatever its whole-second lease says.
        if least_until <= now {
            ops.push(wire::delete(&least_key));
        }
        if !self.while_held(Operation::Release, lease, ops, &[]).await? {
            return Ok(false);
        }
        if least_until > now {
            // Ended on time while this process lives; by its lease (rounded up to whole
            // seconds) if it does not.
            self.client.delete_later(
                least_key,
                token_revision(lease),
                Duration::from_millis(least_until - now),
            );
        }
        Ok(true)
    }

    async fn extend(
        &self,
        lease: &LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<LockLease>, Error> {
        let name = lease.name();
        let now = now_ms();
        let (renewed, renewed_ms) = self
            .grant_for(Operation::Extend, name, lock_at_most_for)
            .await?;
        // A longer lock_at_least_for than the acquisition's: a new minimum-hold key, to
        // locked_at + lock_at_least_for (as far as this instance's clock tells).
        let least_until = to_ms(lease.locked_at()).saturating_add(ms(lock_at_least_for));
        let least = if lock_at_least_for > lease.lock_at_least_for() && least_until > now {
            match self
                .grant(
                    Operation::Extend,
                    name,
                    Duration::from_millis(least_until - now),
                )
                .await
            {
                Ok(id) => id,
                Err(error) => {
                    self.client.revoke_later(renewed);
                    return Err(error);
                }
            }
        } else {
            0
        };
        let lock_until = now.saturating_add(renewed_ms);
        let value = LockValue::of_lease(lease, lock_until);
        let mut ops = vec![
            wire::put(
                &self.keys.held(name),
                lease.holder().as_bytes().to_vec(),
                renewed,
            ),
            wire::put(&self.keys.lock(name), value.encode(), 0),
        ];
        if least != 0 {
            ops.push(wire::put(&self.keys.least(name), Vec::new(), least));
        }
        if !self
            .while_held(Operation::Extend, lease, ops, &[renewed, least])
            .await?
        {
            return Ok(None);
        }
        Ok(Some(lease.extended(
            from_ms(lock_until),
            lock_at_most_for,
            lock_at_least_for,
        )))
    }

    fn holder(&self) -> &str {
        &self.holder
    }

    fn release_hints(&self) -> Option<tokio::sync::broadcast::Receiver<Arc<str>>> {
        self.hints.subscribe(&self.client, &self.keys)
    }

    fn run_log(&self) -> Option<&dyn RunLog> {
        Some(self)
    }

    fn inspector(&self) -> Option<&dyn LockInspector> {
        Some(self)
    }

    fn board(&self) -> Option<&dyn shedlock_core::Board> {
        Some(self)
    }
}

/// The error for key `kv` of lock `lock` holding a value shedlock did not write.
pub(crate) fn unreadable(operation: Operation, lock: &str, kv: &KeyValue, reason: String) -> Error {
    EtcdError::Unreadable {
        key: String::from_utf8_lossy(&kv.key).into_owned(),
        reason,
    }
    .into_store(operation, lock)
}

/// The revision a lease's held key was created at: its fencing token.
fn token_revision(lease: &LockLease) -> i64 {
    // Tokens come from revisions (i64); a larger one never matches a key.
    i64::try_from(lease.fencing_token()).unwrap_or(-1)
}

pub(crate) fn read_now() -> SystemTime {
    from_ms(now_ms())
}
