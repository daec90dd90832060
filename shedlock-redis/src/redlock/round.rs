//! One round of RedLock acquisition: ask every master, tally the answers, take back a failed
//! round's grants, and decide how long to wait before retrying a split vote.

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::join_all;
use shedlock_core::{LockConfiguration, LockLease};

use super::RedLockProvider;
use crate::error::ServerError;
use crate::node::Claim;
use crate::scripts::AcquireReply;
use crate::time::{millis, system_time};

/// A master's grant: its index, the grant time and the lease end (ms, its clock).
pub(super) type Grant = (usize, u64, u64);

/// What the masters answered to one round of acquisition.
#[derive(Debug, Default)]
pub(super) struct Round {
    /// The masters that granted it: index, grant time and lease end (ms, their clocks).
    pub(super) granted: Vec<Grant>,
    /// What the refusing masters hold: token and holder.
    pub(super) refused: Vec<(u64, String)>,
    /// The highest floor of a master that found the proposal behind.
    pub(super) behind: Option<u64>,
    /// How many masters refused the tick (the lock free there).
    pub(super) tick_refused: usize,
    /// The highest clock a master answered with, µs since the epoch.
    pub(super) clock_us: Option<u64>,
    pub(super) failures: Vec<ServerError>,
}

impl Round {
    /// Takes in master `index`'s answer.
    fn tally(&mut self, index: usize, reply: Result<AcquireReply, ServerError>) {
        let reply = match reply {
            Ok(reply) => reply,
            Err(failure) => {
                self.failures.push(failure);
                return;
            }
        };
        self.clock_us = self.clock_us.max(Some(reply.now_us()));
        match reply {
            AcquireReply::Granted {
                now_ms,
                lock_until_ms,
                ..
            } => self.granted.push((index, now_ms, lock_until_ms)),
            AcquireReply::Refused { token, holder, .. } => self.refused.push((token, holder)),
            AcquireReply::TokenBehind { floor, .. } => {
                self.behind = self.behind.max(Some(floor));
            }
            AcquireReply::TickRefused { .. } => self.tick_refused += 1,
        }
    }

    /// The token of a lease that a majority of masters hold (the same holder and token): a
    /// lease that was granted, as opposed to the grants of attempts that split the votes and
    /// are being taken back, which must not move the next proposal.
    pub(super) fn held_token(&self, quorum: usize) -> Option<u64> {
        self.refused
            .iter()
            .filter(|held| self.refused.iter().filter(|other| other == held).count() >= quorum)
            .map(|&(token, _)| token)
            .max()
    }
}

impl RedLockProvider {
    /// One round for each of `attempts` (a lock and its proposal), one script call per master
    /// for all of them. `since_call` is how long this acquisition call has been running: a
    /// retry refuses a lock acquired since the call began, as the first round would have found
    /// it held, so a retried attempt never takes a lock another instance acquired and released
    /// in the meantime (e.g. a scheduler tick that another instance already ran).
    pub(super) async fn acquire_round(
        &self,
        attempts: &[(&LockConfiguration, u64)],
        since_call: Duration,
    ) -> Vec<Round> {
        // The call's own duration counts in whole milliseconds, less two: masters keep
        // millisecond times, and a lock acquired (and released) just before this call began,
        // in the same or the previous millisecond, must not look acquired during it (an
        // immediate retry after a token proposal that was behind would refuse it).
        let during_call = Duration::from_millis(
            u64::try_from(since_call.as_millis().saturating_sub(2)).unwrap_or(u64::MAX),
        );
        let claims: Vec<Claim> = attempts
            .iter()
            .map(|&(config, proposed)| Claim {
                key: self.key(config.name()),
                lease_ms: millis(config.lock_at_most_for()),
                window_ms: millis(config.acquired_within_window() + during_call),
                proposed_token: proposed,
                tick: config.tick(),
            })
            .collect();
        let holder = &*self.settings.holder;
        // A proposal up to one per-master timeout behind a master's clock is still taken: the
        // estimate it follows lags by a round trip, and a slower answer is a failure anyway.
        let tolerance_us = u64::try_from(self.settings.timeout.as_micros()).unwrap_or(u64::MAX);
        let replies = join_all(
            self.nodes
                .iter()
                .map(|node| node.acquire(holder, tolerance_us, &claims)),
        )
        .await;
        let mut rounds: Vec<Round> = attempts.iter().map(|_| Round::default()).collect();
        for (index, master) in replies.into_iter().enumerate() {
            for (round, reply) in rounds.iter_mut().zip(master) {
                round.tally(index, reply);
            }
        }
        rounds
    }

    /// How long to wait before retrying a split vote. The attempts that split it break the tie
    /// the same way: the one whose holder sorts first among those with the most grants retries
    /// after one round's time (when the others' grants are back), the others after two rounds
    /// and a random delay, by when it has normally won. A random delay alone lets loaded
    /// instances collide round after round.
    pub(super) fn split_pause(&self, round: &Round, elapsed: Duration) -> Duration {
        let mine = round.granted.len();
        let me = &*self.settings.holder;
        let yields = round.refused.iter().any(|(_, holder)| {
            let theirs = round.refused.iter().filter(|(_, h)| h == holder).count();
            theirs > mine || (theirs == mine && holder.as_str() < me)
        });
        if yields {
            elapsed * 2 + jitter(self.algorithm.retry_delay)
        } else {
            elapsed
        }
    }

    /// Takes back what failed attempts won, `(key, token, grants)` each, in one call per
    /// master (best effort: a master that does not answer keeps its grants until their leases
    /// end, and the next proposals go above its tokens).
    pub(super) async fn undo(&self, failed: &[(String, u64, &[Grant])]) {
        let holder = &*self.settings.holder;
        let mut per_master: Vec<Vec<(&str, u64)>> = vec![Vec::new(); self.nodes.len()];
        for (key, token, granted) in failed {
            for &(index, ..) in *granted {
                per_master[index].push((key, *token));
            }
        }
        join_all(
            self.nodes
                .iter()
                .zip(&per_master)
                .filter(|(_, grants)| !grants.is_empty())
                .map(|(node, grants)| node.undo(holder, grants)),
        )
        .await;
    }
}

/// The lease granted by a majority: the earliest grant and the earliest end, less `drift`.
pub(super) fn agreed_lease(
    config: &LockConfiguration,
    holder: &Arc<str>,
    token: u64,
    granted: &[Grant],
    drift: Duration,
) -> LockLease {
    let (mut locked_at, mut lock_until) = (u64::MAX, u64::MAX);
    for &(_, granted_at, until) in granted {
        locked_at = locked_at.min(granted_at);
        lock_until = lock_until.min(until);
    }
    LockLease::new(
        config,
        Arc::clone(holder),
        token,
        system_time(locked_at),
        system_time(lock_until) - drift,
    )
}

/// A random delay up to `max`, so that instances that split the votes do not collide again.
fn jitter(max: Duration) -> Duration {
    use std::hash::{BuildHasher as _, Hasher as _};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    let fraction = hasher.finish() as f64 / u64::MAX as f64;
    max.mul_f64(fraction)
}
