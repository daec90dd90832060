//! Ticks: each ran at most once, and a tick that did not run has a reason the product stands
//! by. The reasons: a lease whose holder was killed, paused or cut off still held the lock
//! (`lock_at_most_for` is the safety net), the database was down, every instance reported the
//! tick missed (a pause or an overloaded host passed over it), or the lock was still held by
//! an earlier tick's run that started late (it keeps its lock for `lock_at_least_for` from its
//! start, and a cron tick refuses a lock taken within 250 ms before it was due). A tick skipped
//! while the lock was free is a violation.

use std::collections::{BTreeSet, HashMap};
use std::ops::Range;

use super::{Expectations, Report};
use crate::backend::JournalRow;
use crate::event::Event;
use crate::fleet::Received;

/// How much earlier than its own fire time a cron tick counts another instance's acquisition
/// as its own run (the scheduler's allowance for clocks and timers a little ahead).
const CRON_ALLOWANCE_US: i64 = 250_000;

/// Slack for the order of events on one host: a worker prints what the database decided a
/// moment before.
const SLACK_US: i64 = 10_000;

/// A lease as far as holding the lock goes: from `since` (database clock) until released or,
/// at release, `since + lock_at_least_for`, whichever is later.
struct Hold {
    since: i64,
    until: i64,
}

#[allow(clippy::too_many_arguments)]
pub(super) fn check_ticks(
    events: &[Received],
    journal: &[JournalRow],
    locks: &BTreeSet<&str>,
    dead: &HashMap<&str, Vec<(i64, i64)>>,
    ticks: &Range<i64>,
    expect: &Expectations,
    report: &mut Report,
) {
    let mut runs: HashMap<(&str, i64), usize> = HashMap::new();
    for row in journal {
        *runs.entry((row.lock.as_str(), row.tick)).or_default() += 1;
    }
    let holds = holds(events, expect.at_least_us);
    let skips = skipped_attempts(events);
    let mut last_attempt: HashMap<&str, i64> = HashMap::new();
    for r in events {
        if let Event::Attempt { lock, tick, .. } = &r.event {
            let last = last_attempt.entry(lock).or_insert(*tick);
            *last = (*last).max(*tick);
        }
    }
    for &lock in locks {
        let dead = dead.get(lock).map(Vec::as_slice).unwrap_or_default();
        for tick in ticks.clone() {
            report.ticks_checked += 1;
            let fire = tick * expect.tick_us;
            match runs.get(&(lock, tick)).copied().unwrap_or(0) {
                1 => {}
                0 if dead
                    .iter()
                    .any(|&(from, until)| fire > from && fire < until)
                    || expect.outages.iter().any(|o| o.contains(&fire)) =>
                {
                    report.excused_ticks += 1
                }
                0 => match skips.get(&(lock, tick)) {
                    // Passed over by every worker: the gap rule holds each that attempted a
                    // later tick to have reported it missed.
                    None if last_attempt.get(lock).is_some_and(|&last| last > tick) => {
                        report.missed_everywhere += 1
                    }
                    None => {
                        report.missed_ticks += 1;
                        report.violations.push(format!(
                            "{lock}: tick {tick} did not run: no worker attempted it"
                        ));
                    }
                    Some(attempts) => {
                        let lock_holds = holds.get(lock).map(Vec::as_slice).unwrap_or_default();
                        let free = attempts.iter().find(|&&(attempted, learnt)| {
                            !lock_holds.iter().any(|h| {
                                h.since <= learnt
                                    && (attempted <= h.until + SLACK_US
                                        || h.since > fire - CRON_ALLOWANCE_US)
                            })
                        });
                        match free {
                            None => report.suppressed_ticks += 1,
                            Some(&(attempted, _)) => {
                                report.missed_ticks += 1;
                                report.violations.push(format!(
                                    "{lock}: tick {tick} did not run, though the lock was free \
                                     when it was attempted at {attempted}"
                                ));
                            }
                        }
                    }
                },
                n => {
                    report.duplicate_ticks += 1;
                    report
                        .violations
                        .push(format!("{lock}: tick {tick} ran {n} times"));
                }
            }
        }
    }
}

/// Every lease per lock, from the `acquired` and `released` lines.
fn holds(events: &[Received], at_least_us: i64) -> HashMap<&str, Vec<Hold>> {
    let mut released: HashMap<(&str, u64), i64> = HashMap::new();
    for r in events {
        if let Event::Released { lock, token, at } = &r.event {
            released.insert((lock, *token), *at);
        }
    }
    let mut holds: HashMap<&str, Vec<Hold>> = HashMap::new();
    for r in events {
        if let Event::Acquired {
            lock,
            token,
            since,
            until,
            ..
        } = &r.event
        {
            let end = released
                .get(&(lock.as_str(), *token))
                .map_or(*until, |&at| at.max(since + at_least_us));
            holds.entry(lock).or_default().push(Hold {
                since: *since,
                until: end,
            });
        }
    }
    holds
}

/// Per lock and tick, the attempts that ended skipped: (attempted at, learnt at).
fn skipped_attempts(events: &[Received]) -> HashMap<(&str, i64), Vec<(i64, i64)>> {
    let mut pending: HashMap<(usize, &str), (i64, i64)> = HashMap::new();
    let mut skipped: HashMap<(&str, i64), Vec<(i64, i64)>> = HashMap::new();
    for r in events {
        match &r.event {
            Event::Attempt { lock, tick, at } => {
                pending.insert((r.worker, lock), (*tick, *at));
            }
            Event::Skipped { lock, at } => {
                if let Some((tick, attempted)) = pending.remove(&(r.worker, lock.as_str())) {
                    skipped
                        .entry((lock, tick))
                        .or_default()
                        .push((attempted, *at));
                }
            }
            Event::Acquired { lock, .. } | Event::AcquireFailed { lock, .. } => {
                pending.remove(&(r.worker, lock.as_str()));
            }
            _ => {}
        }
    }
    skipped
}
