//! The checker: from what the workers reported and what the journal table holds, per lock:
//! executions never overlap; fencing tokens strictly increase; no write with a superseded token
//! was accepted; every tick ran exactly once (or was excused by a fault); counts add up.
//!
//! "Stale" is decided from acquisitions alone: a write carrying token `t` is stale when some
//! worker had already acquired the same lock with a token `> t` before the write was attempted
//! (both times are read after the fact on the one host clock, so a write the checker calls
//! stale certainly was).

mod leadership;
mod missed;
mod report;
mod ticks;

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ops::Range;

use crate::backend::JournalRow;
use crate::event::{Counters, Event, WriteOutcome};
use crate::fleet::{Received, Signal};
use leadership::check_leadership;
use missed::check_unattempted_ticks;
use report::add;
pub use report::{Report, Takeover};
use ticks::check_ticks;

/// What the run was supposed to do, for the tick check.
#[derive(Debug, Clone, Default)]
pub struct Expectations {
    /// Tick length in µs.
    pub tick_us: i64,
    /// Ticks that must each have run exactly once (unless excused), if checked.
    pub ticks: Option<Range<i64>>,
    /// Times (µs) when ticks may be missed, e.g. a database outage.
    pub outages: Vec<Range<i64>>,
    /// The jobs' `lock_at_least_for` in µs: how long a run keeps its lock after it started.
    pub at_least_us: i64,
}

/// A fault the harness injected.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    /// The worker.
    pub worker: usize,
    /// What was done to it.
    pub signal: Signal,
    /// When (µs since the epoch).
    pub at: i64,
}

/// Acquisitions of one lock, by time, with the highest token seen up to each.
pub(crate) struct Acquisitions {
    /// (at, token, until, worker), sorted by `at`.
    pub(crate) list: Vec<(i64, u64, i64, usize)>,
    max_token_so_far: Vec<u64>,
}

impl Acquisitions {
    fn new(mut list: Vec<(i64, u64, i64, usize)>) -> Self {
        list.sort_unstable();
        let max_token_so_far = list
            .iter()
            .scan(0, |max, a| {
                *max = (*max).max(a.1);
                Some(*max)
            })
            .collect();
        Acquisitions {
            list,
            max_token_so_far,
        }
    }

    /// Whether a token greater than `token` had been acquired before `time`.
    fn superseded_before(&self, token: u64, time: i64) -> bool {
        let before = self.list.partition_point(|a| a.0 < time);
        before > 0 && self.max_token_so_far[before - 1] > token
    }
}

/// Checks a run. `killed` workers may end mid-execution without a summary.
pub fn check(
    events: &[Received],
    journal: &[JournalRow],
    killed: &[usize],
    faults: &[Fault],
    expect: &Expectations,
) -> Report {
    let mut report = Report {
        journal_rows: journal.len(),
        killed: killed.len(),
        paused: faults.iter().filter(|f| f.signal == Signal::Stop).count(),
        ..Report::default()
    };
    let mut per_worker: BTreeMap<usize, Counters> = BTreeMap::new();
    let mut summaries: HashMap<usize, Counters> = HashMap::new();
    let mut holders: HashMap<&str, usize> = HashMap::new();
    let mut acquired: HashMap<&str, Vec<(i64, u64, i64, usize)>> = HashMap::new();
    let mut writes = Vec::new();
    let mut locks: BTreeSet<&str> = BTreeSet::new();
    let mut lost = Vec::new();
    // Attempts not yet answered, per worker and lock: (at, index into `events`).
    let mut open_attempts: HashMap<(usize, &str), i64> = HashMap::new();
    for r in events {
        let c = per_worker.entry(r.worker).or_default();
        match &r.event {
            Event::Ready { holder, .. } => {
                holders.insert(holder, r.worker);
            }
            Event::Attempt { lock, at, .. } => {
                c.attempts += 1;
                locks.insert(lock);
                open_attempts.insert((r.worker, lock.as_str()), *at);
            }
            Event::Acquired {
                lock,
                token,
                at,
                until,
                ..
            } => {
                c.acquired += 1;
                open_attempts.remove(&(r.worker, lock.as_str()));
                acquired
                    .entry(lock)
                    .or_default()
                    .push((*at, *token, *until, r.worker));
            }
            Event::Skipped { lock, .. } => {
                c.skipped += 1;
                open_attempts.remove(&(r.worker, lock.as_str()));
            }
            Event::Missed { count, .. } => c.missed += count,
            Event::Overlapped { count, .. } => c.overlapped += count,
            Event::AcquireFailed { lock, .. } => {
                c.errors += 1;
                open_attempts.remove(&(r.worker, lock.as_str()));
            }
            Event::Lost { lock, token, at } => {
                report.lost_signals += 1;
                lost.push((lock.as_str(), *token, *at, r.worker));
            }
            Event::Write {
                lock,
                token,
                end,
                outcome,
                ..
            } => {
                match outcome {
                    WriteOutcome::Accepted => c.accepted += 1,
                    WriteOutcome::Rejected => c.rejected += 1,
                    WriteOutcome::Failed(_) => c.failed += 1,
                }
                writes.push((r.worker, lock.as_str(), *token, *end, outcome));
            }
            Event::Stopped { .. } => c.stopped += 1,
            Event::Summary(counters) => {
                summaries.insert(r.worker, *counters);
            }
            _ => {}
        }
    }
    // A lease whose acquire answer came after its local deadline is never reported acquired:
    // the executor reports it lost and gives it back at once. It still took its token and held
    // the lock until given back.
    for (lock, token, at, worker) in lost {
        let list = acquired.entry(lock).or_default();
        if !list.iter().any(|a| a.1 == token) {
            list.push((at, token, at, worker));
        }
    }
    report.processes = per_worker.len();
    let v = &mut report.violations;

    // Counts: every attempt was acquired, skipped or failed; every acquisition ended in a write
    // or in its run stopped before it.
    for (&w, c) in &per_worker {
        report.counts = add(report.counts, *c);
        let decided = c.acquired + c.skipped + c.errors;
        let written = c.accepted + c.rejected + c.failed + c.stopped;
        if killed.contains(&w) {
            let slack = locks.len() as u64;
            if decided > c.attempts || c.attempts - decided > slack || written > c.acquired {
                v.push(format!("killed worker {w}: counts do not add up: {c:?}"));
            }
            continue;
        }
        match summaries.get(&w) {
            None => v.push(format!("worker {w} exited without a summary")),
            Some(summary) if summary != c => v.push(format!(
                "worker {w}: its summary {summary:?} differs from its event lines {c:?}"
            )),
            Some(_) => {}
        }
        if decided != c.attempts {
            v.push(format!(
                "worker {w}: {} attempts but {decided} outcomes",
                c.attempts
            ));
        }
        if written != c.acquired {
            v.push(format!(
                "worker {w}: {} acquisitions but {written} journal writes and stopped runs",
                c.acquired
            ));
        }
    }

    let acquisitions: HashMap<&str, Acquisitions> = acquired
        .into_iter()
        .map(|(lock, list)| (lock, Acquisitions::new(list)))
        .collect();
    let superseded = |lock: &str, token: u64, time: i64| {
        acquisitions
            .get(lock)
            .is_some_and(|a| a.superseded_before(token, time))
    };

    // The journal against itself: no overlap, tokens rising in time and in commit order.
    let mut rows_by_lock: BTreeMap<&str, Vec<&JournalRow>> = BTreeMap::new();
    for row in journal {
        locks.insert(&row.lock);
        rows_by_lock.entry(&row.lock).or_default().push(row);
    }
    for (lock, rows) in &mut rows_by_lock {
        for (earlier, later) in falling_tokens(rows) {
            report.token_regressions += 1;
            v.push(format!(
                "{lock}: committed token {later} after token {earlier}"
            ));
        }
        rows.sort_by_key(|r| (r.start, r.id));
        for (earlier, later) in falling_tokens(rows) {
            report.token_regressions += 1;
            v.push(format!(
                "{lock}: token {later} started after token {earlier}"
            ));
        }
        // Compared with the latest end so far, not just the previous row's.
        let mut latest: Option<&JournalRow> = None;
        for &row in rows.iter() {
            if let Some(prev) = latest
                && row.start < prev.end
            {
                report.overlaps += 1;
                v.push(format!(
                    "{lock}: {} (token {}) started {} µs before {} (token {}) ended",
                    row.holder,
                    row.token,
                    prev.end - row.start,
                    prev.holder,
                    prev.token
                ));
            }
            if latest.is_none_or(|prev| row.end > prev.end) {
                latest = Some(row);
            }
        }
    }

    // Stale writes, and the journal against what workers said about their writes.
    let committed: HashSet<(&str, u64)> = journal
        .iter()
        .map(|r| (r.lock.as_str(), r.token as u64))
        .collect();
    let mut accepted_lines: HashSet<(&str, u64)> = HashSet::new();
    for &(w, lock, token, end, outcome) in &writes {
        if superseded(lock, token, end) {
            report.stale_attempted += 1;
        }
        let in_journal = committed.contains(&(lock, token));
        match outcome {
            WriteOutcome::Accepted if !in_journal => v.push(format!(
                "worker {w}: write {lock}/{token} accepted but not in the journal"
            )),
            WriteOutcome::Accepted => {
                accepted_lines.insert((lock, token));
            }
            _ if in_journal => v.push(format!(
                "worker {w}: write {lock}/{token} reported {outcome:?} but committed"
            )),
            _ => {}
        }
    }
    for row in journal {
        if superseded(&row.lock, row.token as u64, row.end) {
            report.stale_accepted += 1;
            v.push(format!(
                "{}: {} committed token {} after a newer token was acquired",
                row.lock, row.holder, row.token
            ));
        }
        let writer = holders.get(row.holder.as_str());
        if !accepted_lines.contains(&(row.lock.as_str(), row.token as u64))
            && !writer.is_some_and(|w| killed.contains(w))
        {
            v.push(format!(
                "{}/{}: journal row without an accepted write line",
                row.lock, row.token
            ));
        }
    }

    // Leases that never committed: their holder was killed, paused or cut off. An attempt
    // whose answer no line reports may have acquired the lock: only a worker killed between
    // asking and printing leaves one (tokens cannot tell, since they follow the store's clock
    // rather than count acquisitions). Its lease may block the lock from the attempt until the
    // lock's next acquisition.
    let mut dead: HashMap<&str, Vec<(i64, i64)>> = HashMap::new();
    for (&lock, a) in &acquisitions {
        let windows = dead.entry(lock).or_default();
        for &(at, token, until, _) in &a.list {
            if !committed.contains(&(lock, token)) {
                windows.push((at - expect.tick_us, until));
            }
        }
    }
    let mut unanswered: Vec<_> = open_attempts.into_iter().collect();
    unanswered.sort_unstable();
    for ((worker, lock), at) in unanswered {
        report.unobserved_acquisitions += 1;
        if !killed.contains(&worker) {
            v.push(format!(
                "{lock}: worker {worker} asked for the lock at {at} µs and reported no answer"
            ));
        }
        let next = acquisitions
            .get(lock)
            .and_then(|a| a.list.iter().find(|x| x.0 > at))
            .map_or(i64::MAX, |x| x.0);
        dead.entry(lock).or_default().push((at, next));
    }

    if let Some(ticks) = &expect.ticks {
        check_ticks(events, journal, &locks, &dead, ticks, expect, &mut report);
    }

    // Takeovers after faults: never before the lease ended. A lease hit by several faults
    // (paused, then killed) counts once, for the first.
    let faults_in_order = {
        let mut sorted = faults.to_vec();
        sorted.sort_by_key(|f| f.at);
        sorted
    };
    let faults = &faults_in_order;
    let mut counted: HashSet<(&str, u64)> = HashSet::new();
    for fault in faults {
        for r in events.iter().filter(|r| r.worker == fault.worker) {
            let Event::Acquired {
                lock,
                token,
                since,
                until,
                ..
            } = &r.event
            else {
                continue;
            };
            let finished = writes.iter().any(|&(w, l, t, end, _)| {
                w == fault.worker && l == lock && t == *token && end <= fault.at
            });
            // Granted (database clock) before the fault: a paused worker may print it later.
            if *since > fault.at || finished || !counted.insert((lock.as_str(), *token)) {
                continue;
            }
            // Tokens count up by one: the next holder's token is known, if it reported it.
            let next_at = acquisitions[lock.as_str()]
                .list
                .iter()
                .find(|a| a.1 == token + 1)
                .map(|a| a.0);
            if let Some(next) = next_at
                && next < *until
            {
                report.violations.push(format!(
                    "{lock}: token {token} of faulted worker {} taken over {} µs before its lease ended",
                    fault.worker,
                    until - next
                ));
            }
            report.takeovers.push(Takeover {
                lock: lock.clone(),
                token: *token,
                until: *until,
                fault_at: fault.at,
                next_at,
            });
        }
    }
    check_leadership(events, &faults_in_order, &mut report);
    check_unattempted_ticks(events, killed, &mut report);
    report.locks = locks.len();
    report
}

/// The tokens of consecutive `rows` where the later is not above the earlier: (earlier, later).
fn falling_tokens(rows: &[&JournalRow]) -> impl Iterator<Item = (i64, i64)> {
    rows.windows(2)
        .filter(|pair| pair[1].token <= pair[0].token)
        .map(|pair| (pair[0].token, pair[1].token))
}

#[cfg(test)]
mod tests;
