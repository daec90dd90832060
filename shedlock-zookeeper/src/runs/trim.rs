//! What is kept of the run nodes: at most `runs_per_lock` + [`RUN_TRIM_SLACK`] per lock, none
//! older than `run_retention` past [`RUN_TRIM_SLACK`] more ends of the provider.
//!
//! - **By count, per lock**: every start and end reads its lock directory's `Stat` in the same
//!   round trip as its write. A directory holding `runs_per_lock` + half the slack nodes is
//!   trimmed to the newest `runs_per_lock` (names sort as runs started), whichever instance
//!   wrote and whatever the order in which locks end: the count is the store's, not a
//!   process's.
//! - **By age, across locks**: every [`RUN_TRIM_SLACK`]th end a provider records sweeps the
//!   lock directories. Each directory's data is a lower bound of its runs' starts (ms, ensemble
//!   time), written by every trim: the start of the oldest run it kept, or the trim's time when
//!   it kept none (runs created later start later). A sweep reads these bounds (one small read
//!   per lock, pipelined) and trims only the directories whose bound is past the retention, so
//!   it costs a read per lock, not per record; a directory the sweep emptied is deleted.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use shedlock_core::RUN_TRIM_SLACK;
use zookeeper_client::{Client, Stat};

use super::stored::parse_node_name;
use super::{is, no_node};
use crate::ZkLockProvider;
use crate::error::ZkError;
use crate::names::decode_name;

/// Lock directories whose bounds a sweep reads at once.
const SWEEP_BATCH: usize = 64;

/// Lock directories a sweep trims at once.
const SWEEP_TRIMS: usize = 8;

impl ZkLockProvider {
    /// Trims `lock`'s runs if its directory, read as `counted` alongside a write at ensemble
    /// time `now_ms`, holds too many. Housekeeping: a failure is logged, never the run's.
    pub(super) async fn trim_if_full(
        &self,
        client: &Client,
        lock: &str,
        counted: Result<Option<Stat>, ZkError>,
        now_ms: i64,
    ) {
        let full =
            matches!(counted, Ok(Some(stat)) if stat.num_children as usize >= self.runs.full_at());
        if full
            && let Err(error) = self
                .trim_dir(client, &self.runs.lock_dir(lock), now_ms)
                .await
        {
            tracing::warn!(%error, lock = %lock, "deleting old run records failed");
        }
    }

    /// Every [`RUN_TRIM_SLACK`]th end this provider records: deletes the runs of every lock
    /// older than the retention at ensemble time `now_ms`.
    pub(super) async fn sweep_now_and_then(&self, client: &Arc<Client>, now_ms: i64) {
        let ends = self.runs.ends.fetch_add(1, Ordering::Relaxed) + 1;
        if !ends.is_multiple_of(u64::from(RUN_TRIM_SLACK)) {
            return;
        }
        if let Err(error) = self.sweep(client, now_ms).await {
            tracing::warn!(%error, "deleting run records past the retention failed");
        }
    }

    /// Reads every lock directory's bound and trims those past the retention,
    /// [`SWEEP_TRIMS`] at a time.
    pub(crate) async fn sweep(&self, client: &Arc<Client>, now_ms: i64) -> Result<(), ZkError> {
        let cutoff = now_ms.saturating_sub(self.runs.retention_ms);
        let dirs = match self
            .session
            .timed(client.list_children(&self.runs.dir))
            .await
        {
            Ok(dirs) => dirs,
            Err(error) if no_node(&error) => return Ok(()),
            Err(error) => return Err(error.at(&self.runs.dir)),
        };
        let dirs: Vec<String> = dirs
            .into_iter()
            .filter(|dir| decode_name(dir).is_some())
            .map(|dir| format!("{}/{dir}", self.runs.dir))
            .collect();
        let mut aged = Vec::new();
        for batch in dirs.chunks(SWEEP_BATCH) {
            let reads: Vec<_> = batch.iter().map(|dir| client.get_data(dir)).collect();
            for (dir, read) in batch.iter().zip(reads) {
                match self.session.timed(read).await {
                    Ok((data, _)) if oldest_start(&data) < cutoff => aged.push(dir.clone()),
                    Ok(_) => {}
                    Err(error) if no_node(&error) => {}
                    Err(error) => return Err(error.at(dir)),
                }
            }
        }
        // Dropping the set (the end was cancelled) stops the trims.
        let mut trims = tokio::task::JoinSet::new();
        let mut failed = None;
        for dir in aged {
            if trims.len() >= SWEEP_TRIMS
                && let Some(Ok(Err(error))) = trims.join_next().await
            {
                failed.get_or_insert(error);
            }
            let (this, client) = (self.clone(), Arc::clone(client));
            trims.spawn(async move { this.trim_dir(&client, &dir, now_ms).await });
        }
        while let Some(done) = trims.join_next().await {
            if let Ok(Err(error)) = done {
                failed.get_or_insert(error);
            }
        }
        failed.map_or(Ok(()), Err)
    }

    /// Deletes the runs in lock directory `dir` beyond the newest `runs_per_lock` and those
    /// started more than the retention before `now_ms` (ensemble time), oldest first, then
    /// writes the directory's bound, or deletes the directory if nothing is left.
    pub(crate) async fn trim_dir(
        &self,
        client: &Client,
        dir: &str,
        now_ms: i64,
    ) -> Result<(), ZkError> {
        let cutoff = now_ms.saturating_sub(self.runs.retention_ms);
        let mut names = match self.session.timed(client.list_children(dir)).await {
            Ok(names) => names,
            Err(error) if no_node(&error) => return Ok(()),
            Err(error) => return Err(error.at(dir)),
        };
        names.retain(|name| parse_node_name(name).is_some());
        names.sort_unstable();
        let excess = names.len().saturating_sub(self.runs.per_lock);
        let mut doomed: Vec<String> = names.drain(..excess).collect();
        // The start of the oldest run kept, once one young enough is found.
        let mut oldest_kept = None;
        'aging: for batch in names.chunks(16) {
            let paths: Vec<String> = batch.iter().map(|name| format!("{dir}/{name}")).collect();
            let stats: Vec<_> = paths.iter().map(|path| client.check_stat(path)).collect();
            for (name, stat) in batch.iter().zip(stats) {
                match self.session.timed(stat).await? {
                    Some(stat) if stat.ctime < cutoff => doomed.push(name.clone()),
                    Some(stat) => {
                        oldest_kept = Some(stat.ctime);
                        break 'aging;
                    }
                    None => {}
                }
            }
        }
        let paths: Vec<String> = doomed.iter().map(|name| format!("{dir}/{name}")).collect();
        let deletes: Vec<_> = paths.iter().map(|path| client.delete(path, None)).collect();
        for (path, delete) in paths.iter().zip(deletes) {
            match self.session.timed(delete).await {
                Ok(()) => {}
                Err(error) if no_node(&error) => {}
                Err(error) => return Err(error.at(path)),
            }
        }
        if oldest_kept.is_none() {
            // Nothing young enough: the directory goes, unless a run was created meanwhile
            // (or the directory holds nodes shedlock did not write).
            match self.session.timed(client.delete(dir, None)).await {
                Ok(()) => return Ok(()),
                Err(error) if no_node(&error) || is(&error, &zookeeper_client::Error::NotEmpty) => {
                }
                Err(error) => return Err(error.at(dir)),
            }
        }
        let bound = oldest_kept.unwrap_or(now_ms).to_string();
        match self
            .session
            .timed(client.set_data(dir, bound.as_bytes(), None))
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if no_node(&error) => Ok(()),
            Err(error) => Err(error.at(dir)),
        }
    }
}

/// A lock directory's bound on its runs' starts (ms); 0 (look) for a directory no trim wrote
/// yet, or data shedlock did not write.
fn oldest_start(data: &[u8]) -> i64 {
    std::str::from_utf8(data)
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_directory_without_a_bound_is_looked_at() {
        assert_eq!(oldest_start(b"1700000000123"), 1_700_000_000_123);
        assert_eq!(oldest_start(b""), 0);
        assert_eq!(oldest_start(b"\xff"), 0);
    }
}
