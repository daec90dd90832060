//! One candidate's campaign: a session, a node, then following or leading until something
//! ends it.

use std::time::Duration;

use shedlock_core::{Candidacy, ElectionConfig};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use zookeeper_client::{AddWatchMode, Client, EventType, PersistentWatcher, WatchedEvent};

use crate::access::Access;
use crate::error::{ZkError, session_ended};
use crate::session::{connect, timed};

/// What ended a session's part in the campaign.
enum End {
    Stopped,
    SessionEnded,
}

/// What ended one turn of following or leading.
enum Turn {
    Stopped,
    SessionEnded,
    /// This candidate's node is gone (deleted by hand): join again with a new one.
    NodeGone,
    /// Look at the candidates again.
    Recheck,
}

pub(super) struct Campaign<'a> {
    pub(super) connect_string: &'a str,
    pub(super) access: &'a Access,
    pub(super) dir: String,
    pub(super) holder: &'a str,
    pub(super) config: &'a ElectionConfig,
    pub(super) candidacy: &'a Candidacy,
    pub(super) stop: &'a CancellationToken,
}

impl Campaign<'_> {
    /// Campaigns until stopped, with a new session whenever one ends.
    pub(super) async fn run(&self) {
        while !self.stop.is_cancelled() {
            let session = tokio::select! {
                () = self.stop.cancelled() => return,
                session = connect(self.connect_string, self.access, self.config.lease_duration, self.config.lease_duration) => session,
            };
            let end = match session {
                Ok(client) => self.with_session(&client).await,
                Err(error) => {
                    tracing::warn!(election = %self.dir, %error, "cannot open a ZooKeeper session, retrying");
                    if self.pause().await {
                        continue;
                    }
                    End::Stopped
                }
            };
            if let End::Stopped = end {
                return;
            }
        }
    }

    /// Waits one retry period; `false` when stopped meanwhile.
    async fn pause(&self) -> bool {
        tokio::select! {
            () = self.stop.cancelled() => false,
            () = tokio::time::sleep(self.config.retry_period) => true,
        }
    }

    /// How long after a confirmed write the leader trusts its leadership: `renew_deadline`,
    /// shortened in proportion if the ensemble granted a shorter session than requested.
    fn trust(&self, negotiated: Duration) -> Duration {
        let requested = self.config.lease_duration;
        if negotiated >= requested {
            return self.config.renew_deadline;
        }
        tracing::warn!(
            election = %self.dir, ?requested, ?negotiated,
            "the ensemble granted a shorter session timeout than lease_duration; leadership is trusted for a proportionally shorter time"
        );
        self.config
            .renew_deadline
            .mul_f64(negotiated.as_secs_f64() / requested.as_secs_f64())
    }

    async fn with_session(&self, client: &Client) -> End {
        let trust = self.trust(client.session_timeout());
        loop {
            let node = match self.join(client).await {
                Ok(node) => node,
                Err(end) => return end,
            };
            let path = format!("{}/{node}", self.dir);
            match self.take_part(client, &node, &path, trust).await {
                Turn::NodeGone | Turn::Recheck => {}
                Turn::SessionEnded => {
                    self.candidacy.step_down("ZooKeeper session ended");
                    return End::SessionEnded;
                }
                Turn::Stopped => {
                    self.candidacy.step_down("resigned");
                    // Deleting the node hands over at once; closing the session (when the
                    // client is dropped) would too, a moment later.
                    if let Err(error) =
                        timed(self.config.retry_period, client.delete(&path, None)).await
                    {
                        tracing::debug!(%error, "could not delete the candidate node; the session's end removes it");
                    }
                    return End::Stopped;
                }
            }
        }
    }

    /// Creates this candidate's ephemeral sequential node; returns its name.
    async fn join(&self, client: &Client) -> Result<String, End> {
        let ephemeral = self.access.ephemeral_sequential();
        let persistent = self.access.persistent();
        let prefix = format!("{}/n-", self.dir);
        loop {
            if self.stop.is_cancelled() {
                return Err(End::Stopped);
            }
            let created = timed(
                self.config.renew_deadline,
                client.create(&prefix, self.holder.as_bytes(), &ephemeral),
            )
            .await;
            match created {
                Ok((_, sequence)) => return Ok(format!("n-{sequence}")),
                Err(ZkError::Client(zookeeper_client::Error::NoNode)) => {
                    let made = timed(
                        self.config.renew_deadline,
                        client.mkdir(&self.dir, &persistent),
                    )
                    .await;
                    if let Err(error) = made {
                        tracing::warn!(election = %self.dir, %error, "cannot create the election node, retrying");
                        if !self.pause().await {
                            return Err(End::Stopped);
                        }
                    }
                }
                Err(ZkError::Client(error)) if session_ended(&error) => {
                    return Err(End::SessionEnded);
                }
                // Refused, so nothing was created: a new session would be refused the same.
                Err(error @ ZkError::NotAuthorized) => {
                    tracing::warn!(election = %self.dir, %error, "cannot join the election, retrying");
                    if !self.pause().await {
                        return Err(End::Stopped);
                    }
                }
                Err(error) => {
                    // The node may or may not exist now: give up this session, and with it
                    // whatever it created, rather than leave a node nobody campaigns for.
                    tracing::warn!(election = %self.dir, %error, "joining the election failed; opening a new session");
                    return Err(End::SessionEnded);
                }
            }
        }
    }

    /// Follows or leads with `node` until the session ends, the node goes, or the candidate
    /// resigns.
    async fn take_part(&self, client: &Client, node: &str, path: &str, trust: Duration) -> Turn {
        let Some(mine) = sequence(node) else {
            return Turn::NodeGone;
        };
        loop {
            if self.stop.is_cancelled() {
                return Turn::Stopped;
            }
            let children =
                match timed(self.config.renew_deadline, client.list_children(&self.dir)).await {
                    Ok(children) => children,
                    Err(error) => match self.after_error(error, "listing the candidates").await {
                        Turn::Recheck => continue,
                        other => return other,
                    },
                };
            if !children.iter().any(|c| c == node) {
                tracing::warn!(election = %self.dir, node, "this candidate's node was deleted; joining again");
                return Turn::NodeGone;
            }
            let predecessor = children
                .iter()
                .filter_map(|c| sequence(c).map(|s| (s, c)))
                .filter(|&(s, _)| s < mine)
                .max();
            let turn = match predecessor {
                None => self.lead(client, path, trust).await,
                Some((_, before)) => self.follow(client, &format!("{}/{before}", self.dir)).await,
            };
            match turn {
                Turn::Recheck => {}
                other => return other,
            }
        }
    }

    /// Waits until the node just below this candidate's is deleted.
    async fn follow(&self, client: &Client, predecessor: &str) -> Turn {
        loop {
            let watch = timed(
                self.config.renew_deadline,
                client.check_and_watch_stat(predecessor),
            )
            .await;
            let watcher = match watch {
                Ok((None, _)) => return Turn::Recheck,
                Ok((Some(_), watcher)) => watcher,
                Err(error) => return self.after_error(error, "watching the predecessor").await,
            };
            let event = tokio::select! {
                () = self.stop.cancelled() => return Turn::Stopped,
                event = watcher.changed() => event,
            };
            // The leader's confirmations change its node's data: watch again, nothing moved.
            if event.event_type != EventType::NodeDataChanged {
                return Turn::Recheck;
            }
        }
    }

    /// Takes office with a write to this candidate's node (its zxid is the term), then
    /// confirms the session with another write every retry period.
    async fn lead(&self, client: &Client, path: &str, trust: Duration) -> Turn {
        // Both requests leave at once. Watching its own node, the leader learns of its
        // deletion (by hand) from the same transaction that wakes its successor, not at its
        // next confirmation.
        let sent = Instant::now();
        let (written, watch) = tokio::join!(
            timed(trust, client.set_data(path, self.holder.as_bytes(), None)),
            timed(trust, client.watch(path, AddWatchMode::Persistent)),
        );
        let term = match written {
            Ok(stat) => stat.mzxid.max(0) as u64,
            Err(ZkError::Client(zookeeper_client::Error::NoNode)) => return Turn::NodeGone,
            Err(error) => return self.after_error(error, "taking office").await,
        };
        let mut own_node = match watch {
            Ok(watcher) => Some(watcher),
            Err(error) => {
                return self
                    .after_error(error, "watching the leader's own node")
                    .await;
            }
        };
        if !self.candidacy.elected(term, sent + trust) {
            return Turn::Recheck;
        }
        let session_end = session_end(client);
        tokio::pin!(session_end);
        loop {
            let Some(valid_until) = self.candidacy.valid_until() else {
                return Turn::Recheck;
            };
            let next = (Instant::now() + self.config.retry_period).min(valid_until);
            tokio::select! {
                () = self.stop.cancelled() => return Turn::Stopped,
                () = &mut session_end => return Turn::SessionEnded,
                () = self.candidacy.term_ended() => return Turn::Recheck,
                event = next_event(&mut own_node) => {
                    if event.event_type == EventType::NodeDeleted {
                        self.candidacy.step_down("the leader's node was deleted");
                        return Turn::NodeGone;
                    }
                    if event.session_state.is_terminated() {
                        return Turn::SessionEnded;
                    }
                    continue;
                }
                () = tokio::time::sleep_until(next) => {}
            }
            if !self.candidacy.is_leader() {
                return Turn::Recheck;
            }
            let sent = Instant::now();
            let confirmed = tokio::time::timeout_at(
                valid_until,
                client.set_data(path, self.holder.as_bytes(), None),
            )
            .await;
            match confirmed {
                Ok(Ok(_)) => {
                    if !self.candidacy.renewed(sent + trust) {
                        return Turn::Recheck;
                    }
                }
                Ok(Err(zookeeper_client::Error::NoNode)) => {
                    self.candidacy.step_down("the leader's node was deleted");
                    return Turn::NodeGone;
                }
                Ok(Err(error)) if session_ended(&error) => return Turn::SessionEnded,
                Ok(Err(error)) => {
                    tracing::warn!(election = %self.dir, %error, "leadership not confirmed, retrying until the deadline");
                }
                Err(_) => {
                    self.candidacy.step_down(
                        "no write confirmed by the ensemble before the leadership deadline",
                    );
                    return Turn::Recheck;
                }
            }
        }
    }

    /// After a failed request: the session's end, or a pause before looking again.
    async fn after_error(&self, error: ZkError, doing: &str) -> Turn {
        if let ZkError::Client(e) = &error
            && session_ended(e)
        {
            return Turn::SessionEnded;
        }
        tracing::warn!(election = %self.dir, %error, "{doing} failed, retrying");
        if self.pause().await {
            Turn::Recheck
        } else {
            Turn::Stopped
        }
    }
}

/// The next event of a persistent watch; never, without one. (A terminal session event is
/// the last one: the caller must not ask again.)
async fn next_event(watcher: &mut Option<PersistentWatcher>) -> WatchedEvent {
    match watcher {
        Some(watcher) => watcher.changed().await,
        None => std::future::pending().await,
    }
}

/// Completes when the client's session has ended for good (expired, closed, auth failed).
async fn session_end(client: &Client) {
    let mut states = client.state_watcher();
    if client.state().is_terminated() {
        return;
    }
    while !states.changed().await.is_terminated() {}
}

/// The sequence number ZooKeeper appended to a candidate node `n-<sequence>`.
pub(super) fn sequence(node: &str) -> Option<i64> {
    node.strip_prefix("n-")?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::sequence;

    #[test]
    fn only_candidate_nodes_have_a_sequence() {
        assert_eq!(sequence("n-0000000042"), Some(42));
        assert_eq!(sequence("n-0000000000000000042"), Some(42));
        assert_eq!(sequence("x-0000000042"), None);
        assert_eq!(sequence("n-abc"), None);
    }
}
