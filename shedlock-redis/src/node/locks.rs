//! The lock scripts on one node: acquire (a batch of claims), release, undo, extend, and the
//! reads of inspection (a lock's fields, `TIME`, the keys under a prefix, the replication).

use shedlock_core::Tick;

use super::{Connection, Node};
use crate::cluster;
use crate::error::{ServerError, ServerErrorKind};
use crate::scripts::{ACQUIRE, AcquireReply, EXTEND, RELEASE, STATE, UNDO, stored_number};
use crate::time::tick_millis;

/// One lock of an [acquire](Node::acquire) call.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub(crate) key: String,
    pub(crate) lease_ms: u64,
    /// How long before `TIME` an acquisition refuses the lock, ms.
    pub(crate) window_ms: u64,
    /// 0: the server picks the token (one server); else RedLock's proposal.
    pub(crate) proposed_token: u64,
    pub(crate) tick: Option<Tick>,
}

/// The keys and arguments of the acquire script for `claims` (see [`ACQUIRE`]).
pub(crate) fn acquire_arguments<'a>(
    holder: &str,
    tolerance_us: u64,
    claims: &'a [Claim],
) -> (Vec<&'a str>, Vec<String>) {
    let mut args = vec![holder.to_owned(), tolerance_us.to_string()];
    for claim in claims {
        args.extend([
            claim.lease_ms.to_string(),
            claim.window_ms.to_string(),
            claim.proposed_token.to_string(),
        ]);
        match claim.tick {
            Some(tick) => args.extend([
                tick_millis(&tick).to_string(),
                tick.spacing_millis().to_string(),
                tick.ahead_millis().to_string(),
            ]),
            None => args.extend([String::new(), "0".to_owned(), "0".to_owned()]),
        }
    }
    (
        claims.iter().map(|claim| claim.key.as_str()).collect(),
        args,
    )
}

/// Lease fields read by [`Node::state`]: holder, token, locked_at, lock_until, now (ms).
pub(crate) type StateParts = (String, u64, u64, u64, u64);

impl Node {
    /// Runs the acquire script once for all of `claims` (in their order, one round trip),
    /// answering each: a proposal is taken if above the stored token and at most
    /// `tolerance_us` behind the server's clock. A call that fails fails every claim, each
    /// error naming the claim's key.
    pub(crate) async fn acquire(
        &self,
        holder: &str,
        tolerance_us: u64,
        claims: &[Claim],
    ) -> Vec<Result<AcquireReply, ServerError>> {
        if claims.is_empty() {
            return Vec::new();
        }
        let (keys, args) = acquire_arguments(holder, tolerance_us, claims);
        let mut invocation = ACQUIRE.prepare_invoke();
        for key in &keys {
            invocation.key(key);
        }
        for arg in &args {
            invocation.arg(arg);
        }
        let key = claims.first().map(|claim| claim.key.as_str());
        let replies = self.run::<Vec<Vec<redis::Value>>>(key, &invocation).await;
        self.acquire_answers(claims, replies)
    }

    /// Each claim's answer in the acquire script's `replies` (or the call's failure).
    pub(crate) fn acquire_answers(
        &self,
        claims: &[Claim],
        replies: Result<Vec<Vec<redis::Value>>, ServerError>,
    ) -> Vec<Result<AcquireReply, ServerError>> {
        let key = claims.first().map(|claim| claim.key.as_str());
        let replies: Vec<Vec<redis::Value>> = match replies {
            Ok(replies) if replies.len() == claims.len() => replies,
            Ok(replies) => {
                let reply = format!("{} answers to {} locks", replies.len(), claims.len());
                let failure = self.error(key, ServerErrorKind::UnexpectedReply(reply));
                return claims
                    .iter()
                    .map(|c| Err(failure.for_key(&c.key)))
                    .collect();
            }
            Err(failure) => {
                return claims
                    .iter()
                    .map(|c| Err(failure.for_key(&c.key)))
                    .collect();
            }
        };
        replies
            .iter()
            .zip(claims)
            .map(|(reply, claim)| {
                let kind = match AcquireReply::parse(reply) {
                    Some(Ok(answer)) => return Ok(answer),
                    Some(Err(text)) => ServerErrorKind::Script(text),
                    None => ServerErrorKind::UnexpectedReply(format!("{reply:?}")),
                };
                Err(self.error(Some(&claim.key), kind))
            })
            .collect()
    }

    /// Whether the live lease `(holder, token)` was released. Publishes `name` on `channel`
    /// (unless empty) when the lock became free.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn release(
        &self,
        key: &str,
        holder: &str,
        token: u64,
        at_least_ms: u64,
        channel: &str,
        name: &str,
    ) -> Result<bool, ServerError> {
        let mut invocation = RELEASE.prepare_invoke();
        invocation
            .key(key)
            .arg(holder)
            .arg(token)
            .arg(at_least_ms)
            .arg(channel)
            .arg(name);
        let released: i64 = self.run(Some(key), &invocation).await?;
        Ok(released == 1)
    }

    /// Takes back the grants `(key, token)` of `holder`'s failed RedLock attempts, in one
    /// round trip: per grant, whether it was still there.
    pub(crate) async fn undo(
        &self,
        holder: &str,
        grants: &[(&str, u64)],
    ) -> Result<Vec<bool>, ServerError> {
        let mut invocation = UNDO.prepare_invoke();
        invocation.arg(holder);
        for &(key, token) in grants {
            invocation.key(key).arg(token);
        }
        let key = grants.first().map(|&(key, _)| key);
        let undone: Vec<i64> = self.run(key, &invocation).await?;
        Ok(undone.into_iter().map(|undone| undone == 1).collect())
    }

    /// The new `lock_until` (ms) when the live lease `(holder, token)` was extended.
    pub(crate) async fn extend(
        &self,
        key: &str,
        holder: &str,
        token: u64,
        lease_ms: u64,
    ) -> Result<Option<u64>, ServerError> {
        let mut invocation = EXTEND.prepare_invoke();
        invocation.key(key).arg(holder).arg(token).arg(lease_ms);
        let reply: Vec<i64> = self.run(Some(key), &invocation).await?;
        match reply.as_slice() {
            [1, lock_until] => Ok(u64::try_from(*lock_until).ok()),
            [0] => Ok(None),
            _ => Err(self.error(
                Some(key),
                ServerErrorKind::UnexpectedReply(format!("{reply:?}")),
            )),
        }
    }

    /// The lease fields of `key`, or `None` when the key does not exist.
    pub(crate) async fn state(&self, key: &str) -> Result<Option<StateParts>, ServerError> {
        let mut invocation = STATE.prepare_invoke();
        invocation.key(key);
        let reply: Vec<Option<String>> = self.run(Some(key), &invocation).await?;
        if reply.is_empty() {
            return Ok(None);
        }
        let field = |i: usize| reply.get(i).and_then(Option::as_deref);
        let number = |i: usize, name: &'static str| {
            field(i)
                .and_then(stored_number)
                .ok_or_else(|| self.error(Some(key), ServerErrorKind::Corrupt(name)))
        };
        let holder = field(0)
            .ok_or_else(|| self.error(Some(key), ServerErrorKind::Corrupt("holder")))?
            .to_owned();
        Ok(Some((
            holder,
            number(1, "token")?,
            number(2, "locked_at")?,
            number(3, "lock_until")?,
            number(4, "TIME")?,
        )))
    }

    /// The server's clock (`TIME`), in milliseconds since the epoch.
    pub(crate) async fn time(&self) -> Result<u64, ServerError> {
        let mut connection = self.connection();
        let time = redis::cmd("TIME");
        let (seconds, micros): (u64, u64) =
            match tokio::time::timeout(self.timeout, time.query_async(&mut connection)).await {
                Ok(Ok(reply)) => reply,
                Ok(Err(error)) => return Err(self.error(None, ServerErrorKind::Redis(error))),
                Err(_) => return Err(self.error(None, ServerErrorKind::Timeout(self.timeout))),
            };
        Ok(seconds * 1000 + micros / 1000)
    }

    /// Every key matching `pattern` (`SCAN`, so the server is never blocked for long).
    pub(crate) async fn keys(&self, pattern: &str) -> Result<Vec<String>, ServerError> {
        let mut connection = match self.connection() {
            Connection::Single(connection) => connection,
            Connection::Cluster(mut connection) => {
                // Each master's keys, scanned on each.
                let keys = cluster::keys(&mut connection, pattern);
                return match tokio::time::timeout(self.timeout * 10, keys).await {
                    Ok(reply) => reply.map_err(|kind| self.error(None, kind)),
                    Err(_) => Err(self.error(None, ServerErrorKind::Timeout(self.timeout * 10))),
                };
            }
        };
        let mut cursor = 0u64;
        let mut keys = Vec::new();
        loop {
            let scan = scan_command(cursor, pattern);
            let (next, mut batch): (u64, Vec<String>) =
                match tokio::time::timeout(self.timeout, scan.query_async(&mut connection)).await {
                    Ok(Ok(reply)) => reply,
                    Ok(Err(error)) => return Err(self.error(None, ServerErrorKind::Redis(error))),
                    Err(_) => return Err(self.error(None, ServerErrorKind::Timeout(self.timeout))),
                };
            keys.append(&mut batch);
            if next == 0 {
                keys.sort();
                keys.dedup();
                return Ok(keys);
            }
            cursor = next;
        }
    }

    /// The server's role and its connected replicas, from `INFO replication`.
    pub(crate) async fn replication(&self) -> Result<(String, u32), ServerError> {
        let mut connection = self.connection();
        let mut info = redis::cmd("INFO");
        info.arg("replication");
        let text: String =
            match tokio::time::timeout(self.timeout, info.query_async(&mut connection)).await {
                Ok(Ok(reply)) => reply,
                Ok(Err(error)) => return Err(self.error(None, ServerErrorKind::Redis(error))),
                Err(_) => return Err(self.error(None, ServerErrorKind::Timeout(self.timeout))),
            };
        let field = |name: &str| {
            text.lines()
                .find_map(|line| line.trim().strip_prefix(name)?.strip_prefix(':'))
                .map(str::to_owned)
        };
        let role = field("role").unwrap_or_else(|| "unknown".to_owned());
        let replicas = field("connected_slaves")
            .and_then(|count| count.parse().ok())
            .unwrap_or(0);
        Ok((role, replicas))
    }

    /// On a cluster, its shards (see [`cluster::shards`]); `None` elsewhere.
    pub(crate) async fn cluster_shards(
        &self,
    ) -> Option<Result<Vec<(String, Vec<String>, u32)>, ServerError>> {
        let Connection::Cluster(mut connection) = self.connection() else {
            return None;
        };
        let shards = tokio::time::timeout(self.timeout, cluster::shards(&mut connection)).await;
        Some(match shards {
            Ok(reply) => reply.map_err(|kind| self.error(None, kind)),
            Err(_) => Err(self.error(None, ServerErrorKind::Timeout(self.timeout))),
        })
    }
}

/// One `SCAN` step from `cursor` over the keys matching `pattern`, 500 at a time.
pub(crate) fn scan_command(cursor: u64, pattern: &str) -> redis::Cmd {
    let mut scan = redis::cmd("SCAN");
    scan.arg(cursor)
        .arg("MATCH")
        .arg(pattern)
        .arg("COUNT")
        .arg(500);
    scan
}
