//! `EtcdElector`: etcd's election recipe behind shedlock's `Elector` seam. Each candidate puts
//! a key under `<prefix>elections/<election>/` on an etcd lease of its own; the candidate
//! whose key has the lowest create revision leads, and that revision is its term.

use shedlock_core::async_trait;
use shedlock_core::{Candidacy, ElectionConfig, Elector, Error, LockRecord, Operation};
use std::sync::Arc;
use std::time::{Duration, SystemTime};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::builder::EtcdElectorBuilder;
use crate::client::Client;
use crate::error::EtcdError;
use crate::names::{Keys, ttl_seconds};
use crate::wire;

/// Leader election on etcd: candidates' keys on leases, the oldest key leads.
///
/// A campaign grants an etcd lease of `lease_duration` (whole seconds, rounded up), puts its
/// key `<prefix>elections/<election>/<lease id>` on it, and renews the lease every
/// `retry_period`. The candidate whose key has the lowest create revision leads; its term is
/// that revision, so terms strictly increase over the election's leaders (a later leader's
/// key was created after the earlier leader's) and are comparable with the lock provider's
/// fencing tokens. Followers watch the election's keys and check again as soon as one is
/// deleted: a resigning leader revokes its lease, and the next candidate leads within one
/// round trip.
///
/// A leader trusts its leadership until `renew_deadline` after the last renewal that
/// succeeded (counted from when it was sent): a leader cut off from the cluster steps down
/// then, before etcd can let its lease (of `lease_duration`, counted from when etcd received
/// that renewal) run out and elect another. A leader whose key was deleted by hand steps
/// down at its next renewal, and campaigns again.
///
/// Switching an election from a lock provider to etcd is one line:
///
/// ```no_run
/// use shedlock_runtime::LeaderElection;
/// use shedlock_etcd::EtcdLockProvider;
///
/// # async fn run() -> Result<(), shedlock_core::Error> {
/// let provider = EtcdLockProvider::connect("http://etcd1:2379,http://etcd2:2379").await?;
/// let election = LeaderElection::builder("batch", provider.elector())
///     .on_elected(|term| println!("leading, term {term}"))
///     .start()?;
/// # Ok(())
/// # }
/// ```
///
/// Clones share the connection.
#[derive(Debug, Clone)]
pub struct EtcdElector {
    client: Client,
    keys: Arc<Keys>,
    holder: Arc<str>,
}

impl EtcdElector {
    /// Connects to the cluster (`http://host:2379`, several separated by commas) with key
    /// prefix `shedlock/`, campaigning as [`default_holder()`](shedlock_core::default_holder).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`endpoints`) for an endpoint that is not a URL;
    /// [`Error::Store`] when no member answers within the request timeout.
    pub async fn connect(endpoints: &str) -> Result<Self, Error> {
        Self::builder(endpoints).connect().await
    }

    /// Configures endpoints, prefix, holder, credentials and TLS; see [`EtcdElectorBuilder`].
    pub fn builder(endpoints: impl Into<String>) -> EtcdElectorBuilder {
        EtcdElectorBuilder::new(endpoints.into())
    }

    /// The prefix of the candidates' keys of `election`: `<prefix>elections/<election>/`.
    pub fn election_prefix(&self, election: &str) -> String {
        String::from_utf8_lossy(&self.keys.election(election)).into_owned()
    }

    /// The identity written into this candidate's keys.
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Who leads `election` now, as its candidates' keys record it: the candidate whose key
    /// has the lowest create revision, whether or not that candidate is this elector. For
    /// tools (the `shedlock` command's dashboard) that show an election's leader; `None` when
    /// no candidate campaigns. One read of the election's keys (one per candidate), writes
    /// nothing and renews no one's lease.
    ///
    /// The record: `name` is the election, `holder` the leader's identity, `fencing_token`
    /// its term (its key's create revision, as `on_elected` received it), `held` true.
    /// A reader of etcd learns that the leader's key exists, not when its lease will end:
    /// `locked_at` is `read_at` (this machine's clock, as the provider's `store_time`) and
    /// `lock_until` one millisecond later.
    ///
    /// # Errors
    /// [`Error::Store`] ([`Operation::Read`](shedlock_core::Operation::Read)) when the
    /// cluster does not answer within the request timeout.
    pub async fn leader(&self, election: &str) -> Result<Option<LockRecord>, Error> {
        let prefix = self.keys.election(election);
        let range = self
            .client
            .range(wire::RangeRequest::prefix(&prefix, false))
            .await
            .map_err(|e| e.into_store(Operation::Read, election))?;
        let read_at = SystemTime::now();
        Ok(range
            .kvs
            .iter()
            .min_by_key(|kv| kv.create_revision)
            .map(|kv| {
                LockRecord::new(
                    election,
                    String::from_utf8_lossy(&kv.value),
                    read_at,
                    read_at + Duration::from_millis(1),
                    u64::try_from(kv.create_revision).unwrap_or_default(),
                    read_at,
                )
            }))
    }

    pub(crate) fn from_parts(client: Client, keys: Arc<Keys>, holder: Arc<str>) -> Self {
        EtcdElector {
            client,
            keys,
            holder,
        }
    }
}

#[async_trait]
impl Elector for EtcdElector {
    fn check(&self, election: &str, config: &ElectionConfig) -> Result<(), Error> {
        config.validate()?;
        if election.is_empty() {
            return Err(Error::invalid_config("name", "must not be empty"));
        }
        if election.contains('/') {
            return Err(Error::invalid_config(
                "name",
                format!("must not contain '/' (it separates the election's keys): {election:?}"),
            ));
        }
        Ok(())
    }

    async fn campaign(&self, candidacy: &Candidacy, stop: &CancellationToken) {
        let (election, config) = (candidacy.election(), candidacy.config());
        let mut backoff = config.retry_period;
        while !stop.is_cancelled() {
            let outcome = Campaign {
                elector: self,
                election,
                config,
                candidacy,
                stop,
            }
            .run()
            .await;
            match outcome {
                Ok(()) => backoff = config.retry_period,
                Err(error) => {
                    tracing::warn!(election, %error, "etcd campaign failed; campaigning again");
                    tokio::select! {
                        () = stop.cancelled() => {}
                        () = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(config.lease_duration);
                }
            }
        }
    }
}

/// One candidacy on one lease: from putting the key to losing it or being stopped.
struct Campaign<'a> {
    elector: &'a EtcdElector,
    election: &'a str,
    config: &'a ElectionConfig,
    candidacy: &'a Candidacy,
    stop: &'a CancellationToken,
}

impl Campaign<'_> {
    /// Returns `Ok` when the candidacy ended normally (stopped, or its key or lease gone) and
    /// should start over at once.
    async fn run(&self) -> Result<(), EtcdError> {
        let client = &self.elector.client;
        // Trust counts from before the grant: etcd's lease starts later, so it ends no
        // earlier than the first deadline.
        let granted_at = Instant::now();
        let grant = client
            .grant(ttl_seconds(self.config.lease_duration))
            .await?;
        let lease = grant.id;
        let result = self.on_lease(lease, granted_at).await;
        // Step down before etcd can hand over: once the lease is revoked, the next candidate
        // may be elected before the answer to the revocation arrives here.
        self.candidacy.step_down("the etcd campaign ended");
        // Resign (or clean up): deleting the key through the lease hands over at once.
        if let Err(error) = client.revoke(lease).await {
            tracing::debug!(election = self.election, %error, "revoking the campaign's lease failed; it runs out by itself");
        }
        result
    }

    async fn on_lease(&self, lease: i64, granted_at: Instant) -> Result<(), EtcdError> {
        let client = &self.elector.client;
        let prefix = self.elector.keys.election(self.election);
        let mut key = prefix.clone();
        key.extend_from_slice(format!("{lease:016x}").as_bytes());
        let put = client
            .txn(wire::TxnRequest {
                compare: vec![wire::created_at(&key, 0)],
                success: vec![wire::put(
                    &key,
                    self.elector.holder.as_bytes().to_vec(),
                    lease,
                )],
                failure: Vec::new(),
            })
            .await?;
        let mine = put.revision();
        let mut renewed_at = granted_at;
        let mut next_renewal = Instant::now() + self.config.retry_period;
        let (mut events, mut _keeper) = self.watch(&prefix, mine).await?;
        loop {
            // Who leads: the lowest create revision under the election's prefix. A failed
            // read is tried again at the next renewal; trust runs out by itself meanwhile.
            let range = client
                .range(wire::RangeRequest::prefix(&prefix, true))
                .await;
            let range = match range {
                Ok(range) => range,
                Err(error) => {
                    tracing::debug!(election = self.election, %error, "reading the candidates failed; trying again");
                    tokio::select! {
                        () = self.stop.cancelled() => return Ok(()),
                        () = tokio::time::sleep(self.config.retry_period / 2) => {}
                    }
                    if Instant::now() >= next_renewal {
                        match self.renew(lease, &mut renewed_at, &mut next_renewal).await {
                            Ok(true) => {}
                            Ok(false) => return Ok(()),
                            Err(error) => {
                                tracing::debug!(election = self.election, %error, "renewing the campaign's lease failed; trying again")
                            }
                        }
                    }
                    continue;
                }
            };
            let Some(first) = range.kvs.iter().min_by_key(|kv| kv.create_revision) else {
                return Ok(());
            };
            if !range.kvs.iter().any(|kv| kv.key == key) {
                tracing::info!(
                    election = self.election,
                    "the candidate's key is gone; campaigning again"
                );
                return Ok(());
            }
            let leads = first.key == key;
            let valid_until = renewed_at + self.config.renew_deadline;
            if leads && !self.candidacy.is_leader() {
                let term = u64::try_from(mine).unwrap_or_default();
                if !self.candidacy.elected(term, valid_until) {
                    return Ok(());
                }
            }
            // Sleep until the next renewal, a deletion among the candidates, or stop.
            let deleted = tokio::select! {
                () = self.stop.cancelled() => return Ok(()),
                () = tokio::time::sleep_until(next_renewal) => false,
                message = events.message() => match message {
                    Ok(Some(response)) if !response.canceled => true,
                    _ => {
                        // The watch ended: open it again (from now: the read that follows
                        // sees what happened meanwhile).
                        match self.watch(&prefix, 0).await {
                            Ok(watch) => (events, _keeper) = watch,
                            Err(error) => {
                                tracing::debug!(election = self.election, %error, "watching the candidates failed; trying again");
                                tokio::time::sleep(self.config.retry_period / 2).await;
                            }
                        }
                        true
                    }
                },
            };
            if !deleted || Instant::now() >= next_renewal {
                match self.renew(lease, &mut renewed_at, &mut next_renewal).await {
                    Ok(true) => {}
                    Ok(false) => return Ok(()),
                    Err(error) => {
                        // Tried again at the next renewal; a leader's trust runs out at its
                        // deadline meanwhile, before etcd can end the lease.
                        tracing::debug!(election = self.election, %error, "renewing the campaign's lease failed; trying again");
                        next_renewal = Instant::now() + self.config.retry_period / 2;
                    }
                }
            }
        }
    }

    /// Renews the campaign's lease once. `Ok(false)`: the lease is gone or the leadership's
    /// deadline passed before the renewal was confirmed; the candidacy starts over.
    async fn renew(
        &self,
        lease: i64,
        renewed_at: &mut Instant,
        next_renewal: &mut Instant,
    ) -> Result<bool, EtcdError> {
        let sent = Instant::now();
        let ttl = self.elector.client.keep_alive_once(lease).await?;
        if ttl <= 0 {
            tracing::info!(
                election = self.election,
                "the campaign's etcd lease ended; campaigning again"
            );
            return Ok(false);
        }
        *renewed_at = sent;
        *next_renewal = sent + self.config.retry_period;
        if self.candidacy.is_leader() && !self.candidacy.renewed(sent + self.config.renew_deadline)
        {
            return Ok(false);
        }
        Ok(true)
    }

    /// Watches deletions under `prefix`, from revision `after` + 1 (0: from now).
    async fn watch(
        &self,
        prefix: &[u8],
        after: i64,
    ) -> Result<
        (
            tonic::Streaming<wire::WatchResponse>,
            crate::client::WatchKeeper,
        ),
        EtcdError,
    > {
        let create = wire::WatchCreateRequest {
            key: prefix.to_vec(),
            range_end: wire::prefix_end(prefix),
            start_revision: if after > 0 { after + 1 } else { 0 },
            filters: vec![wire::FILTER_NOPUT],
        };
        let (mut stream, keeper) = self.elector.client.watch(create).await?;
        // The first response confirms the watch.
        match tokio::time::timeout(self.elector.client.request_timeout(), stream.message()).await {
            Ok(Ok(Some(response))) if response.created && !response.canceled => {
                Ok((stream, keeper))
            }
            Ok(Ok(Some(response))) => Err(EtcdError::Status {
                code: tonic::Code::Aborted,
                message: format!("watch not created: {}", response.cancel_reason),
            }),
            Ok(Ok(None)) => Err(EtcdError::Closed),
            Ok(Err(status)) => Err(EtcdError::from_status(status)),
            Err(_) => Err(EtcdError::Timeout(self.elector.client.request_timeout())),
        }
    }
}
