//! The nodes under the root: created once, and closed to other clients when the provider has
//! credentials.

use shedlock_core::{Error, Operation};
use zookeeper_client::Client;

use super::ZkLockProvider;
use crate::access::world_writable;
use crate::error::ZkError;

impl ZkLockProvider {
    /// Creates `<root>/clock`, `<root>/locks` and `<root>/elections` (and `<root>` and its
    /// missing ancestors) if missing. Idempotent and safe to run from several instances at
    /// once.
    ///
    /// With credentials ([`digest_auth`](crate::ZkLockProviderBuilder::digest_auth)), the
    /// nodes it creates are closed to other clients, and so is every node already under the
    /// root (the root included) that any client may write, for instance created before
    /// credentials were configured: its ACL becomes this user's alone. ACLs that let the world
    /// do no more than read are left as they are (an administrator's choice); so are the ACLs
    /// of existing ancestors of the root. Run records are looked at only in a lock's run
    /// directory that was open itself (a closed one only ever got closed children), so on a
    /// closed tree this reads a node per lock, whatever the run history.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Schema`) when ZooKeeper refuses, e.g. for lack of rights
    /// (naming the node whose ACL could not be changed).
    pub async fn create_schema(&self) -> Result<(), Error> {
        let fail = |e: ZkError| e.into_store(Operation::Schema, &self.paths.root);
        let client = self.session.client().await.map_err(fail)?;
        let persistent = self.session.access().persistent();
        for dir in [&self.paths.locks, &self.paths.elections] {
            self.session
                .timed(client.mkdir(dir, &persistent))
                .await
                .map_err(fail)?;
        }
        match self
            .session
            .timed(client.create(&self.paths.clock, &[], &persistent))
            .await
        {
            Ok(_) | Err(ZkError::Client(zookeeper_client::Error::NodeExists)) => {}
            Err(error) => return Err(fail(error)),
        }
        if self.session.access().is_authenticated() {
            self.close_world_writable(&client).await.map_err(fail)?;
        }
        Ok(())
    }

    /// Gives this session's ACL to every node under the root, the root included, that lets
    /// any client write; one level of the tree at a time, in batches whose requests are sent at
    /// once. The runs under a lock's run directory are looked at only when that directory
    /// itself was open: a closed directory only ever got children from this user, closed as
    /// well, so a closed tree costs a request per lock, not per run record.
    async fn close_world_writable(&self, client: &Client) -> Result<(), ZkError> {
        let mut level = vec![self.paths.root.clone()];
        while !level.is_empty() {
            let mut next = Vec::new();
            for batch in level.chunks(CLOSE_BATCH) {
                next.extend(self.close_batch(client, batch).await?);
            }
            level = next;
        }
        Ok(())
    }

    /// Closes the open nodes of `batch`; returns the children to look at next.
    async fn close_batch(&self, client: &Client, batch: &[String]) -> Result<Vec<String>, ZkError> {
        let acls = self.session.access().acls();
        let runs = format!("{}/runs/", self.paths.root);
        let is_run_dir = |path: &str| {
            path.strip_prefix(&runs)
                .is_some_and(|rest| !rest.contains('/'))
        };
        let reads: Vec<_> = batch
            .iter()
            .map(|path| {
                let children = (!is_run_dir(path)).then(|| client.list_children(path));
                (client.get_acl(path), children)
            })
            .collect();
        let mut next = Vec::new();
        let mut closing = Vec::new();
        let mut open_run_dirs = Vec::new();
        for (path, (acl, children)) in batch.iter().zip(reads) {
            let (acl, stat) = match self.session.timed(acl).await {
                Ok(found) => found,
                // Gone meanwhile (a candidate's ephemeral node).
                Err(ZkError::Client(zookeeper_client::Error::NoNode)) => continue,
                Err(error) => return Err(error.at(path)),
            };
            let open = world_writable(&acl);
            if open {
                // Against the ACL version read: an ACL changed meanwhile is someone's choice.
                closing.push((path, client.set_acl(path, &acls, Some(stat.aversion))));
            }
            let children = match children {
                Some(children) => children,
                None if open => {
                    open_run_dirs.push(path);
                    continue;
                }
                None => continue,
            };
            match self.session.timed(children).await {
                Ok(children) => next.extend(children.iter().map(|c| format!("{path}/{c}"))),
                Err(ZkError::Client(zookeeper_client::Error::NoNode)) => {}
                Err(error) => return Err(error.at(path)),
            }
        }
        for (path, closed) in closing {
            match self.session.timed(closed).await {
                Ok(_) => {
                    tracing::info!(node = %path, "closed a world-writable node to other clients")
                }
                Err(ZkError::Client(
                    zookeeper_client::Error::NoNode | zookeeper_client::Error::BadVersion,
                )) => {}
                Err(error) => return Err(error.at(path)),
            }
        }
        for path in open_run_dirs {
            match self.session.timed(client.list_children(path)).await {
                Ok(children) => next.extend(children.iter().map(|c| format!("{path}/{c}"))),
                Err(ZkError::Client(zookeeper_client::Error::NoNode)) => {}
                Err(error) => return Err(error.at(path)),
            }
        }
        Ok(next)
    }
}

/// Nodes whose ACLs `create_schema` reads at once.
const CLOSE_BATCH: usize = 256;
