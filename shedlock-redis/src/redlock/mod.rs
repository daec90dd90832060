//! The provider on N independent Redis masters: the RedLock algorithm.

mod acquire;
mod inspect;
mod round;
#[cfg(test)]
mod tests;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use shedlock_core::{
    Error, LockConfiguration, LockInspector, LockLease, LockProvider, Operation, async_trait,
};
use tokio::sync::broadcast;
use tokio::time::Instant;

use crate::RedLockProviderBuilder;
use crate::batch;
use crate::builder::Settings;
use crate::error::{QuorumError, ServerError};
use crate::hints::ReleaseHints;
use crate::names::validate_holder;
use crate::node::Node;
use crate::proposals::Proposals;
use crate::time::{millis, system_time};

/// Locks on N independent Redis masters (no replication between them) with the RedLock
/// algorithm, as published by Redis's author, and fencing tokens agreed by a majority.
///
/// - **acquire** runs the single-server acquire script on every master at once, each within
///   the per-master [timeout](RedLockProviderBuilder::timeout). It succeeds when a majority
///   (N/2 + 1) granted the lease and the validity left, `lock_at_most_for − elapsed − drift`
///   (drift = `lock_at_most_for ×` [clock drift factor](RedLockProviderBuilder::clock_drift_factor)
///   `+ 2 ms`), is positive. Otherwise the masters that granted it take it back (the lease
///   before it is restored, so a failed attempt leaves no recent acquisition behind), and
///   when the attempt won some masters but no majority (instances asking at the same moment
///   split the votes), it is retried a few [times](RedLockProviderBuilder::retries): the
///   instance whose holder sorts first among those with the most grants after one round, the
///   others later.
///   A master that refuses because the lock was acquired within the
///   [window](LockConfiguration::unless_acquired_within) counts as not acquired; each master
///   decides that on its own clock.
/// - A claim [for a tick](LockConfiguration::for_tick) is checked by each master's script
///   against that master's `last_tick` and clock, and granted, as any acquisition, when a
///   majority grants it: a tick granted once is then kept by a majority, and any later
///   majority shares a master that refuses it again. The grants of a failed attempt are taken
///   back with the tick they claimed, so instances that split the votes for one tick can
///   still win it on a retry. A master the undo did not reach (down, or too slow) keeps the
///   tick and refuses that same tick afterwards (never a later one): the tick is then granted
///   only while a majority of the other masters can still grant it.
/// - **acquire_many** runs each round of a batch as one script call per master for all its
///   undecided locks (up to 500), each lock granted, refused or retried as acquire decides
///   it, and the grants of the locks no majority granted go back in one call per master (see
///   [batched claims](crate#batched-claims)).
/// - **release** and **extend** run on every master, matching holder and token; an extension
///   counts only when a majority extended the lease within its validity.
/// - The lease's `lock_until` is the earliest of the majority's, less the drift allowance.
/// - With a minority of masters down, everything goes on; with a majority down, every
///   operation fails with [`Error::Store`] naming the masters that failed.
///
/// # Fencing tokens
///
/// The acquiring instance proposes the token: its estimate of the masters' clock in
/// microseconds since the epoch (the highest clock a master answered with, moved on by its own
/// monotonic clock), or more when it knows a higher token for the lock. A master grants the
/// lease only if the proposal is above its stored token and at most the per-master
/// [timeout](RedLockProviderBuilder::timeout) behind its own clock, and stores it; a master that
/// answers "behind" tells the lowest proposal it would take, and the instance retries at once
/// with that. So a lease exists only with the same token on a majority, and:
///
/// - **while masters keep their data**, any two majorities share a master, which took the
///   later token only above the earlier one: tokens strictly increase;
/// - **when masters lose it** (keys deleted by hand, a flush, restarts without persistence, on
///   any number of masters), the next token is still at least the granting masters' clock
///   less that timeout: above every token granted longer ago than that, as long as the
///   masters' clocks do not go back. A master restarted empty takes the current token at the
///   next acquisition it joins.
///
/// The clocks do not fix RedLock's own weakness: two masters of three that lose a live lease
/// (one restarted while it is live, with one that never had it) grant the lock a second time
/// while the first holder still runs. The second token is above the first, so a resource
/// that checks tokens refuses the first holder's writes once it has seen the second's, but
/// not before (the test `restart_at_once_can_grant_twice` pins this down). Restart a master
/// without persistence only after the longest lease has passed (the published mitigation),
/// or run the masters with `appendonly yes` and `appendfsync always`.
///
/// # Inspection
///
/// It is its own [`LockInspector`], reading what a majority of the masters agree on: a lock's
/// record is the lease `(holder, token)` a majority holds, with the earliest grant and the
/// earliest end less the drift allowance (never later than its holder's lease); the store's
/// clock is the latest time a majority of the masters has reached; a name with no lease common
/// to a majority has no record. An operator's `release_lock` ends the lease on every master
/// that holds it. To see one master's hash, inspect it with a [`RedisLockProvider`](crate::RedisLockProvider)
/// on that master and the same key prefix.
///
/// RedLock is a lease on N clocks: a holder paused past its validity still believes it holds
/// the lock. Pass the fencing token to the resource you write and have it reject older
/// tokens; that, not the lease, is what keeps a paused holder's writes out.
///
/// ```no_run
/// use shedlock_redis::RedLockProvider;
///
/// # async fn run() -> Result<(), shedlock_core::Error> {
/// let provider = RedLockProvider::connect([
///     "redis://10.0.0.1:6379",
///     "redis://10.0.0.2:6379",
///     "redis://10.0.0.3:6379",
/// ])
/// .await?;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct RedLockProvider {
    pub(crate) nodes: Arc<[Node]>,
    pub(crate) settings: Settings,
    algorithm: Arc<Algorithm>,
    /// What this instance knows of the masters' tokens and clocks: the next proposal.
    tokens: Arc<Proposals>,
    hints: Arc<ReleaseHints>,
}

#[derive(Debug)]
struct Algorithm {
    quorum: usize,
    clock_drift_factor: f64,
    retries: u32,
    retry_delay: Duration,
}

impl RedLockProvider {
    /// Connects to the masters at `urls` with the default settings.
    ///
    /// # Errors
    /// See [`RedLockProviderBuilder::connect`].
    pub async fn connect<I, S>(urls: I) -> Result<Self, Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Self::builder().connect(urls).await
    }

    /// Configures key prefix, holder, per-master timeout, drift and retries; see
    /// [`RedLockProviderBuilder`].
    pub fn builder() -> RedLockProviderBuilder {
        RedLockProviderBuilder::default()
    }

    pub(crate) async fn connect_with(
        settings: Settings,
        urls: &[String],
        clock_drift_factor: f64,
        retries: u32,
        retry_delay: Duration,
    ) -> Result<Self, Error> {
        if urls.is_empty() {
            return Err(Error::invalid_config("urls", "no Redis master given"));
        }
        let mut nodes: Vec<Node> = Vec::with_capacity(urls.len());
        for url in urls {
            let node = Node::open(url, &settings.connect())?;
            if nodes.iter().any(|n| n.server() == node.server()) {
                return Err(Error::invalid_config(
                    "urls",
                    format!(
                        "{} is given twice: RedLock needs independent masters",
                        node.server()
                    ),
                ));
            }
            nodes.push(node);
        }
        let provider = RedLockProvider {
            algorithm: Arc::new(Algorithm {
                quorum: nodes.len() / 2 + 1,
                clock_drift_factor,
                retries,
                retry_delay,
            }),
            nodes: nodes.into(),
            settings,
            tokens: Arc::new(Proposals::new(clock_drift_factor)),
            hints: Arc::default(),
        };
        let pings = join_all(provider.nodes.iter().map(Node::ping)).await;
        let mut failures = Vec::new();
        let mut answering = Vec::new();
        for (node, ping) in provider.nodes.iter().zip(pings) {
            match ping {
                Ok(()) => answering.push(node),
                Err(failure) => failures.push(failure),
            }
        }
        if !failures.is_empty() {
            provider.check_quorum(Operation::Read, "*", failures, 0)?;
        }
        join_all(answering.into_iter().map(Node::warn_if_evicting)).await;
        Ok(provider)
    }

    /// The same masters acting as another holder (another instance), sharing the connections.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`holder`) when empty, longer than 255 characters or holding
    /// control characters.
    pub fn with_holder(&self, holder: impl Into<String>) -> Result<Self, Error> {
        let mut provider = self.clone();
        provider.settings.holder = validate_holder(holder.into())?;
        Ok(provider)
    }

    /// The same masters, connections, prefixes and holder, keeping run records for
    /// `retention` and `runs_per_lock` per lock (see
    /// [`run_retention`](crate::RedisLockProviderBuilder::run_retention)).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`run_retention`, `runs_per_lock`) as the builder checks them.
    pub fn with_run_retention(
        &self,
        retention: std::time::Duration,
        runs_per_lock: u32,
    ) -> Result<Self, Error> {
        let mut provider = self.clone();
        provider.settings.runs = self.settings.runs.keeping(retention, runs_per_lock)?;
        Ok(provider)
    }

    /// The masters, as `redis://host:port/db` (never with passwords), in the order given.
    pub fn servers(&self) -> Vec<&str> {
        self.nodes.iter().map(Node::server).collect()
    }

    /// How many masters must agree: N/2 + 1.
    pub fn quorum(&self) -> usize {
        self.algorithm.quorum
    }

    /// The prefix of every lock key.
    pub fn key_prefix(&self) -> &str {
        &self.settings.key_prefix
    }

    /// The prefix of the keys of the fleet's [board](shedlock_core::Board) on the
    /// [board master](Self::board_master) (`board:<key prefix>` unless
    /// [configured](RedLockProviderBuilder::board_key_prefix)).
    pub fn board_key_prefix(&self) -> &str {
        self.settings.board.prefix()
    }

    /// The key of the hash that holds lock `lock_name` on each master.
    pub fn key(&self, lock_name: &str) -> String {
        format!("{}{lock_name}", self.settings.key_prefix)
    }

    /// The channel on which releases publish the name of a lock that became free on a master.
    pub fn release_channel(&self) -> Option<&str> {
        Some(&*self.settings.channel).filter(|c| !c.is_empty())
    }

    /// Releases the lease `(holder, token)` on every master, ending it at
    /// `max(now, locked_at + lock_at_least_for)` on each (the holder's release, or an
    /// operator's with zero): released when a majority held it live.
    async fn release_on_masters(
        &self,
        name: &str,
        holder: &str,
        token: u64,
        lock_at_least_for: Duration,
    ) -> Result<bool, Error> {
        let (key, channel) = (self.key(name), &*self.settings.channel);
        let at_least_ms = millis(lock_at_least_for);
        let replies = join_all(
            self.nodes
                .iter()
                .map(|node| node.release(&key, holder, token, at_least_ms, channel, name)),
        )
        .await;
        let (mut released, mut failures) = (0, Vec::new());
        for reply in replies {
            match reply {
                Ok(true) => released += 1,
                Ok(false) => {}
                Err(failure) => failures.push(failure),
            }
        }
        if released >= self.algorithm.quorum {
            return Ok(true);
        }
        self.check_quorum(Operation::Release, name, failures, released)?;
        Ok(false)
    }

    /// `Err` when more masters failed than the algorithm tolerates for an operation that
    /// succeeded on `succeeded` masters: the outcome cannot be decided.
    fn check_quorum(
        &self,
        operation: Operation,
        lock_name: &str,
        failures: Vec<ServerError>,
        succeeded: usize,
    ) -> Result<(), Error> {
        if succeeded + failures.len() >= self.algorithm.quorum && succeeded < self.algorithm.quorum
            || failures.len() > self.nodes.len() - self.algorithm.quorum
        {
            return Err(Error::store(
                operation,
                lock_name,
                QuorumError {
                    masters: self.nodes.len(),
                    quorum: self.algorithm.quorum,
                    failures,
                },
            ));
        }
        Ok(())
    }

    fn drift(&self, lease: Duration) -> Duration {
        lease.mul_f64(self.algorithm.clock_drift_factor) + Duration::from_millis(2)
    }
}

#[async_trait]
impl LockProvider for RedLockProvider {
    async fn acquire(&self, config: &LockConfiguration) -> Result<Option<LockLease>, Error> {
        let mut answers = self.acquire_locks(&[config]).await;
        answers.pop().unwrap_or(Ok(None))
    }

    /// Rounds of one script call per master for each [chunk](crate#batched-claims) of the
    /// batch (names in order), each lock decided as [`acquire`](Self::acquire) decides it;
    /// the grants of locks a majority did not grant go back in one call per master.
    async fn acquire_many(
        &self,
        configs: &[LockConfiguration],
    ) -> Vec<Result<Option<LockLease>, Error>> {
        batch::in_chunks(
            configs,
            |asked| async move { self.acquire_locks(&asked).await },
        )
        .await
    }

    async fn release(&self, lease: &LockLease) -> Result<bool, Error> {
        let holder = &*self.settings.holder;
        let (name, token) = (lease.name(), lease.fencing_token());
        self.release_on_masters(name, holder, token, lease.lock_at_least_for())
            .await
    }

    async fn extend(
        &self,
        lease: &LockLease,
        lock_at_most_for: Duration,
        lock_at_least_for: Duration,
    ) -> Result<Option<LockLease>, Error> {
        let key = self.key(lease.name());
        let holder = &*self.settings.holder;
        let lease_ms = millis(lock_at_most_for);
        let started = Instant::now();
        let replies = join_all(
            self.nodes
                .iter()
                .map(|node| node.extend(&key, holder, lease.fencing_token(), lease_ms)),
        )
        .await;
        let elapsed = started.elapsed();
        let (mut extended, mut lock_until, mut failures) = (0, u64::MAX, Vec::new());
        for reply in replies {
            match reply {
                Ok(Some(until)) => {
                    extended += 1;
                    lock_until = lock_until.min(until);
                }
                Ok(None) => {}
                Err(failure) => failures.push(failure),
            }
        }
        let drift = self.drift(lock_at_most_for);
        if extended >= self.algorithm.quorum {
            return Ok((lock_at_most_for > elapsed + drift).then(|| {
                lease.extended(
                    system_time(lock_until) - drift,
                    lock_at_most_for,
                    lock_at_least_for,
                )
            }));
        }
        self.check_quorum(Operation::Extend, lease.name(), failures, extended)?;
        Ok(None)
    }

    fn run_log(&self) -> Option<&dyn shedlock_core::RunLog> {
        Some(self)
    }

    fn holder(&self) -> &str {
        &self.settings.holder
    }

    fn release_hints(&self) -> Option<broadcast::Receiver<Arc<str>>> {
        let channel = self.release_channel()?;
        self.hints.subscribe(&self.nodes, &Arc::from(channel))
    }

    fn inspector(&self) -> Option<&dyn LockInspector> {
        Some(self)
    }

    fn board(&self) -> Option<&dyn shedlock_core::Board> {
        Some(self)
    }
}
