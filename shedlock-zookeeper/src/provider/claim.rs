//! One acquisition in two halves, shared by `acquire` and `acquire_many`: the decision on the
//! lock node as read at ensemble time "now" (free? in the window? the tick's turn?) and what
//! to write for it, then the lease from what became of that write.

use std::sync::Arc;

use shedlock_core::{Error, LockConfiguration, LockLease, Operation};
use zookeeper_client::{Client, Stat};

use super::ZkLockProvider;
use super::write::{Guard, LockWrite, Set};
use crate::error::ZkError;
use crate::record::{LeaseRecord, millis, new_incarnation, system_time};

/// An acquisition decided on the node as read: the write that grants it.
#[derive(Debug)]
pub(super) struct Claim {
    path: String,
    data: Vec<u8>,
    incarnation: String,
    tick_ms: Option<i64>,
    /// `None`: there was no node, and the write creates it.
    over: Option<Over>,
}

/// The node a claim writes over.
#[derive(Debug)]
struct Over {
    stat: Stat,
    token: u64,
    /// The node has no incarnation child yet (written by hand): the write gives it one.
    adopt: bool,
}

impl Claim {
    pub(super) fn write(&self) -> LockWrite<'_> {
        let (path, data, incarnation) = (&*self.path, &*self.data, &*self.incarnation);
        match &self.over {
            None => LockWrite::Create {
                path,
                data,
                incarnation,
            },
            Some(over) => LockWrite::Set {
                path,
                data,
                version: over.stat.version,
                guard: if over.adopt {
                    Guard::Adopt(incarnation)
                } else {
                    Guard::Check(incarnation)
                },
            },
        }
    }
}

impl ZkLockProvider {
    /// Decides an acquisition for `config` on its lock node as `read` at ensemble time
    /// `now`, read after it. `Ok(None)`: refused.
    pub(super) fn claim(
        &self,
        config: &LockConfiguration,
        read: Result<(Vec<u8>, Stat), ZkError>,
        now: i64,
    ) -> Result<Option<Claim>, Error> {
        let name = config.name();
        let path = self.paths.lock(name);
        let tick = config.tick().map(|tick| tick.millis());
        let (over, incarnation, tick_ms) = match read {
            Ok((current, stat)) => {
                let record = self.decode(name, Operation::Acquire, &current)?;
                let window = millis(config.acquired_within_window());
                if record.lock_until_ms(&stat) > now
                    || record.locked_at_ms(&stat).saturating_add(window) > now
                    || !claimable(config, record.tick_ms, now)
                {
                    return Ok(None);
                }
                let token = record.token(&stat).checked_add(1).ok_or_else(|| {
                    ZkError::Unreadable {
                        path: path.clone(),
                        reason: "its token cannot grow any more".to_owned(),
                    }
                    .into_store(Operation::Acquire, name)
                })?;
                let adopt = record.incarnation.is_none();
                let over = Over { stat, token, adopt };
                let incarnation = record.incarnation.unwrap_or_else(new_incarnation);
                (Some(over), incarnation, tick.or(record.tick_ms))
            }
            Err(ZkError::Client(zookeeper_client::Error::NoNode)) => {
                if !claimable(config, None, now) {
                    return Ok(None);
                }
                (None, new_incarnation(), tick)
            }
            Err(error) => return Err(error.into_store(Operation::Acquire, name)),
        };
        let token = over.as_ref().map(|over| over.token);
        let lease = config.lock_at_most_for();
        let data = LeaseRecord::acquisition(&self.holder, lease, token, &incarnation, tick_ms);
        Ok(Some(Claim {
            path,
            data: data.encode(),
            incarnation,
            tick_ms,
            over,
        }))
    }

    /// The lease `claim` granted, from what became of its write (`Ok(None)`: someone else
    /// wrote the node first; they hold it now).
    pub(super) async fn settle(
        &self,
        client: &Client,
        config: &LockConfiguration,
        claim: Claim,
        outcome: Result<Set, ZkError>,
        now: i64,
    ) -> Result<Option<LockLease>, Error> {
        let name = config.name();
        let stat = match outcome {
            Ok(Set::Written(stat)) => stat,
            Ok(Set::Changed) => return Ok(None),
            Ok(Set::IncarnationGone) => {
                return match &claim.over {
                    Some(over) => self.incarnation_gone(client, name, &over.stat).await,
                    // Only a write over a node checks its incarnation.
                    None => Ok(None),
                };
            }
            // A create without its parent: the schema is missing.
            Err(error) if claim.over.is_none() => {
                return Err(self.fail(Operation::Acquire, name, &self.paths.locks, error));
            }
            Err(error) => return Err(error.into_store(Operation::Acquire, name)),
        };
        // The first token of a node is the zxid that created it.
        let token = claim
            .over
            .map_or(stat.czxid.max(0) as u64, |over| over.token);
        let lock_until_ms = stat.mtime.saturating_add(millis(config.lock_at_most_for()));
        let granted = LockLease::new(
            config,
            Arc::clone(&self.holder),
            token,
            system_time(stat.mtime),
            system_time(lock_until_ms),
        );
        self.remember(
            &granted,
            &stat,
            claim.incarnation.into(),
            claim.tick_ms,
            now,
        );
        Ok(Some(granted))
    }
}

/// Whether `config`'s tick, if any, may be granted over the node's last tick `last`, at
/// ensemble time `now_ms`: the rule of [`Tick::follows`](shedlock_core::Tick::follows).
fn claimable(config: &LockConfiguration, last: Option<i64>, now_ms: i64) -> bool {
    config
        .tick()
        .is_none_or(|tick| tick.follows(last, system_time(now_ms)))
}
