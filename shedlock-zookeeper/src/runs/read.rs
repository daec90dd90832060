//! Reading a page of runs ([`RunLog::runs`](shedlock_core::RunLog::runs)) without reading more
//! nodes than the page holds.
//!
//! A lock's run node names sort as its runs started (token, then attempt), so its newest runs
//! are its last names: a page lists the lock's children (names only, at most `runs_per_lock`
//! + the slack) and reads the data of the page's nodes alone.
//!
//! - `before`: a binary search over the names, reading node `Stat`s (`ctime` is the start),
//!   all locks' searches in lockstep (one round trip per step, about ten for a thousand
//!   runs); the next page of one lock settles in one step (its first probe is the cursor's
//!   own record).
//! - Across locks, or with `since`: the locks' newest-first streams are merged on their nodes'
//!   `Stat`s (read a few at a time per lock), then the data of the chosen nodes is read.
//!
//! Each request and each answer is one node (at most one record, whose error is at most
//! [`MAX_ERROR_LEN`](shedlock_core::MAX_ERROR_LEN) bytes) or one lock's names, so no message
//! grows with history.

use std::collections::VecDeque;
use std::time::SystemTime;

use shedlock_core::{Error, Operation, RunCursor, RunQuery, RunRecord};
use zookeeper_client::{Client, Stat};

use super::no_node;
use super::stored::parse_node_name;
use crate::ZkLockProvider;
use crate::names::decode_name;
use crate::record::system_time;

/// Requests sent at once (listings, data reads).
const BATCH: usize = 64;

/// Node `Stat`s read at once per lock while merging.
const MAX_CHUNK: usize = 32;

/// One lock's runs, newest first.
struct Stream {
    lock: String,
    dir: String,
    /// Name, token, attempt; newest first.
    names: Vec<(String, u64, u32)>,
    /// The next name not yet looked at.
    next: usize,
    /// Looked at (by `Stat`), not yet chosen.
    heads: VecDeque<(RunCursor, usize)>,
    /// No names left to look at (all looked at, or `since` passed).
    done: bool,
    /// A run started before `since` was seen: nothing after it is chosen.
    past_since: bool,
}

impl Stream {
    fn path(&self, index: usize) -> String {
        format!("{}/{}", self.dir, self.names[index].0)
    }

    fn cursor(&self, index: usize, stat: &Stat) -> RunCursor {
        let (_, token, attempt) = self.names[index];
        RunCursor::new(system_time(stat.ctime), token, attempt, self.lock.as_str())
    }
}

impl ZkLockProvider {
    /// The records `query` asks for, newest first.
    pub(super) async fn read_runs(&self, query: &RunQuery) -> Result<Vec<RunRecord>, Error> {
        let limit = query.limit.unwrap_or(usize::MAX);
        let lock_name = query.lock.as_deref().unwrap_or("*");
        if limit == 0 {
            return Ok(Vec::new());
        }
        let client = self.client(Operation::Runs, lock_name).await?;
        let locks = match &query.lock {
            Some(lock) => vec![lock.clone()],
            None => match self
                .session
                .timed(client.list_children(&self.runs.dir))
                .await
            {
                Ok(dirs) => dirs.iter().filter_map(|dir| decode_name(dir)).collect(),
                Err(error) if no_node(&error) => Vec::new(),
                Err(error) => return Err(self.runs_error("*", &self.runs.dir, error)),
            },
        };
        let mut streams = self.streams(&client, locks).await?;
        if let Some(before) = &query.before {
            self.position(&client, &mut streams, before).await?;
        }
        let chosen: Vec<(usize, usize)> = match &mut streams[..] {
            [] => Vec::new(),
            // One lock, newest first: the page is the next names.
            [one] if query.since.is_none() => {
                let end = one.names.len().min(one.next.saturating_add(limit));
                (one.next..end).map(|index| (0, index)).collect()
            }
            _ => self.merge(&client, &mut streams, query, limit).await?,
        };
        let records = self.read_chosen(&client, &streams, &chosen).await?;
        Ok(query.apply(records))
    }

    /// The streams of `locks` (those with a directory), names listed in batches.
    async fn streams(&self, client: &Client, locks: Vec<String>) -> Result<Vec<Stream>, Error> {
        let mut streams = Vec::with_capacity(locks.len());
        for batch in locks.chunks(BATCH) {
            let dirs: Vec<String> = batch.iter().map(|lock| self.runs.lock_dir(lock)).collect();
            let lists: Vec<_> = dirs.iter().map(|dir| client.list_children(dir)).collect();
            for ((lock, dir), list) in batch.iter().zip(dirs).zip(lists) {
                let names = match self.session.timed(list).await {
                    Ok(names) => names,
                    // No run recorded yet, or its directory swept meanwhile.
                    Err(error) if no_node(&error) => continue,
                    Err(error) => return Err(self.runs_error(lock, &dir, error)),
                };
                let mut names: Vec<(String, u64, u32)> = names
                    .into_iter()
                    .filter_map(|name| {
                        let (token, attempt) = parse_node_name(&name)?;
                        Some((name, token, attempt))
                    })
                    .collect();
                names.sort_unstable_by(|a, b| b.0.cmp(&a.0));
                streams.push(Stream {
                    lock: lock.clone(),
                    dir,
                    names,
                    next: 0,
                    heads: VecDeque::new(),
                    done: false,
                    past_since: false,
                });
            }
        }
        Ok(streams)
    }

    /// Moves each stream to its first run older than `before`, by binary search on the nodes'
    /// `Stat`s, every lock a step per round trip. In the cursor's own lock the first probe is
    /// the node named by its token and attempt: when that is the cursor's record (the next
    /// page of one lock), one probe settles it.
    async fn position(
        &self,
        client: &Client,
        streams: &mut [Stream],
        before: &RunCursor,
    ) -> Result<(), Error> {
        let mut ranges: Vec<(usize, usize)> = streams
            .iter()
            .map(|stream| (0, stream.names.len()))
            .collect();
        let mut hints: Vec<Option<usize>> = streams
            .iter()
            .map(|stream| {
                let key = (before.fencing_token, before.attempt);
                (stream.lock == before.lock)
                    .then(|| {
                        let found = stream
                            .names
                            .binary_search_by(|(_, token, attempt)| key.cmp(&(*token, *attempt)));
                        found.ok()
                    })
                    .flatten()
            })
            .collect();
        loop {
            let probes: Vec<(usize, usize, String)> = ranges
                .iter()
                .enumerate()
                .filter(|(_, (low, high))| low < high)
                .map(|(i, &(low, high))| {
                    let hint = hints[i].take().filter(|hint| (low..high).contains(hint));
                    let probe = hint.unwrap_or(low + (high - low) / 2);
                    (i, probe, streams[i].path(probe))
                })
                .collect();
            if probes.is_empty() {
                break;
            }
            let reads: Vec<_> = probes
                .iter()
                .map(|(_, _, path)| client.check_stat(path))
                .collect();
            for ((i, probe, path), read) in probes.iter().zip(reads) {
                let (low, high) = &mut ranges[*i];
                match self.session.timed(read).await {
                    Ok(Some(stat)) => {
                        let cursor = streams[*i].cursor(*probe, &stat);
                        if cursor == *before {
                            (*low, *high) = (probe + 1, probe + 1);
                        } else if cursor < *before {
                            *high = *probe;
                        } else {
                            *low = probe + 1;
                        }
                    }
                    // Trimmed since the listing: it was among the oldest.
                    Ok(None) => *high = *probe,
                    Err(error) => return Err(self.runs_error(&streams[*i].lock, path, error)),
                }
            }
        }
        for (stream, (low, _)) in streams.iter_mut().zip(ranges) {
            stream.next = low;
        }
        Ok(())
    }

    /// Chooses the newest `limit` runs across `streams` (that `query` selects), on their
    /// nodes' `Stat`s: (stream, name index) pairs.
    async fn merge(
        &self,
        client: &Client,
        streams: &mut [Stream],
        query: &RunQuery,
        limit: usize,
    ) -> Result<Vec<(usize, usize)>, Error> {
        let since = query.since.unwrap_or(SystemTime::UNIX_EPOCH);
        let mut chosen = Vec::new();
        while chosen.len() < limit {
            self.fill(client, streams, limit - chosen.len(), since)
                .await?;
            let newest = streams
                .iter()
                .enumerate()
                .filter_map(|(i, stream)| stream.heads.front().map(|(cursor, _)| (cursor, i)))
                .max_by(|a, b| a.0.cmp(b.0))
                .map(|(_, i)| i);
            let Some(i) = newest else { break };
            let (cursor, index) = streams[i].heads.pop_front().expect("a head");
            if query.before.as_ref().is_none_or(|before| cursor < *before) {
                chosen.push((i, index));
            }
        }
        Ok(chosen)
    }

    /// Reads the next few `Stat`s of every stream that has no head left, all at once; a stream
    /// ends at its names' end or at the first run started before `since`.
    async fn fill(
        &self,
        client: &Client,
        streams: &mut [Stream],
        wanted: usize,
        since: SystemTime,
    ) -> Result<(), Error> {
        let empty: Vec<usize> = (0..streams.len())
            .filter(|&i| streams[i].heads.is_empty() && !streams[i].done)
            .collect();
        if empty.is_empty() {
            return Ok(());
        }
        let chunk = wanted.div_ceil(empty.len()).clamp(1, MAX_CHUNK);
        let mut probes = Vec::new();
        for &i in &empty {
            let stream = &mut streams[i];
            let end = stream.names.len().min(stream.next + chunk);
            probes.extend((stream.next..end).map(|index| (i, index, stream.path(index))));
            stream.next = end;
            if end == stream.names.len() {
                stream.done = true;
            }
        }
        let reads: Vec<_> = probes
            .iter()
            .map(|(_, _, path)| client.check_stat(path))
            .collect();
        for ((i, index, path), read) in probes.iter().zip(reads) {
            let stream = &mut streams[*i];
            match self.session.timed(read).await {
                Ok(Some(stat)) => {
                    let cursor = stream.cursor(*index, &stat);
                    if stream.past_since || cursor.started_at < since {
                        // Names sort as runs started: the rest started earlier still.
                        stream.past_since = true;
                        stream.done = true;
                    } else {
                        stream.heads.push_back((cursor, *index));
                    }
                }
                // Trimmed since the listing.
                Ok(None) => {}
                Err(error) => return Err(self.runs_error(&stream.lock, path, error)),
            }
        }
        Ok(())
    }

    /// The records of the chosen nodes, read in batches; nodes trimmed meanwhile are left out.
    async fn read_chosen(
        &self,
        client: &Client,
        streams: &[Stream],
        chosen: &[(usize, usize)],
    ) -> Result<Vec<RunRecord>, Error> {
        let mut records = Vec::with_capacity(chosen.len());
        for batch in chosen.chunks(BATCH) {
            let paths: Vec<String> = batch
                .iter()
                .map(|&(i, index)| streams[i].path(index))
                .collect();
            let reads: Vec<_> = paths.iter().map(|path| client.get_data(path)).collect();
            for ((&(i, index), path), read) in batch.iter().zip(&paths).zip(reads) {
                let (lock, name) = (&streams[i].lock, &streams[i].names[index].0);
                match self.session.timed(read).await {
                    Ok(node) => records.push(self.run_record(lock, path, name, &node)?),
                    Err(error) if no_node(&error) => {}
                    Err(error) => return Err(self.runs_error(lock, path, error)),
                }
            }
        }
        Ok(records)
    }
}
