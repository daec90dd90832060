//! Reading the locks: one lock or all of them, with `held` decided on ensemble time.

use std::fmt;
use std::time::SystemTime;

use chrono::{DateTime, SecondsFormat, Utc};
use shedlock_core::{Error, Operation};

use crate::ZkLockProvider;
use crate::error::ZkError;
use crate::paths::decode_name;
use crate::record::system_time;

/// A lock node, read with [`ZkLockProvider::lock_state`] or [`ZkLockProvider::list_locks`].
///
/// The same fields as the SQL providers' rows. [`Display`](fmt::Display) prints one line for a
/// person: `nightly: held by web-1:4121:a83e until 2025-06-01T12:00:00.000Z (token 4294967301)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ZkLockRow {
    /// The lock's name.
    pub name: String,
    /// When the current or last lease ends (ensemble time).
    pub lock_until: SystemTime,
    /// When the current or last lease was granted (ensemble time).
    pub locked_at: SystemTime,
    /// Who holds or last held the lock.
    pub locked_by: String,
    /// The token of the last acquisition.
    pub fencing_token: u64,
    /// Whether the lease was still running when the node was read (ensemble time).
    pub held: bool,
}

impl fmt::Display for ZkLockRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = if self.held { "held" } else { "last held" };
        let until =
            DateTime::<Utc>::from(self.lock_until).to_rfc3339_opts(SecondsFormat::Millis, true);
        write!(
            f,
            "{}: {state} by {} until {until} (token {})",
            self.name, self.locked_by, self.fencing_token
        )
    }
}

impl ZkLockProvider {
    /// The node of one lock, if it exists, with `held` decided on ensemble time.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Read`) when ZooKeeper fails or the node holds data
    /// shedlock did not write.
    pub async fn lock_state(&self, lock_name: &str) -> Result<Option<ZkLockRow>, Error> {
        let client = self.client(Operation::Read, lock_name).await?;
        let path = self.paths.lock(lock_name);
        let (clock, read) = tokio::join!(
            self.session
                .timed(client.set_data(&self.paths.clock, &[], None)),
            self.session.timed(client.get_data(&path)),
        );
        let now = clock
            .map_err(|e| self.fail(Operation::Read, lock_name, &self.paths.clock, e))?
            .mtime;
        match read {
            Ok((data, stat)) => self.row(lock_name, &data, &stat, now).map(Some),
            Err(ZkError::Client(zookeeper_client::Error::NoNode)) => Ok(None),
            Err(error) => Err(error.into_store(Operation::Read, lock_name)),
        }
    }

    /// Every lock node, by name, with `held` decided on ensemble time. Nodes whose names
    /// shedlock did not encode are left out.
    ///
    /// # Errors
    /// [`Error::Store`] (`Operation::Read`) when ZooKeeper fails or a node holds data shedlock
    /// did not write.
    pub async fn list_locks(&self) -> Result<Vec<ZkLockRow>, Error> {
        let client = self.client(Operation::Read, "*").await?;
        let (clock, children) = tokio::join!(
            self.session
                .timed(client.set_data(&self.paths.clock, &[], None)),
            self.session.timed(client.list_children(&self.paths.locks)),
        );
        let now = clock
            .map_err(|e| self.fail(Operation::Read, "*", &self.paths.clock, e))?
            .mtime;
        let mut names: Vec<String> = children
            .map_err(|e| self.fail(Operation::Read, "*", &self.paths.locks, e))?
            .iter()
            .filter_map(|node| decode_name(node))
            .collect();
        names.sort_unstable();
        // All reads leave at once; answers come back in order.
        let paths: Vec<String> = names.iter().map(|name| self.paths.lock(name)).collect();
        let reads: Vec<_> = paths.iter().map(|path| client.get_data(path)).collect();
        let mut rows = Vec::with_capacity(names.len());
        for (name, read) in names.iter().zip(reads) {
            match self.session.timed(read).await {
                Ok((data, stat)) => rows.push(self.row(name, &data, &stat, now)?),
                // Deleted since the listing.
                Err(ZkError::Client(zookeeper_client::Error::NoNode)) => {}
                Err(error) => return Err(error.into_store(Operation::Read, name)),
            }
        }
        Ok(rows)
    }

    fn row(
        &self,
        name: &str,
        data: &[u8],
        stat: &zookeeper_client::Stat,
        now: i64,
    ) -> Result<ZkLockRow, Error> {
        let record = self.decode(name, Operation::Read, data)?;
        let lock_until = record.lock_until_ms(stat);
        Ok(ZkLockRow {
            name: name.to_owned(),
            lock_until: system_time(lock_until),
            locked_at: system_time(record.locked_at_ms(stat)),
            locked_by: record.holder.clone(),
            fencing_token: record.token(stat),
            held: lock_until > now,
        })
    }
}
