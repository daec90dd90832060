//! Leader election: no two workers lead at once, and no worker acts as leader on a term a newer
//! leader has superseded.

use std::collections::{BTreeMap, HashMap};

use super::{Fault, Report};
use crate::event::Event;
use crate::fleet::{Received, Signal};

/// Leader-election workers: no two lead at once. A term runs from the worker's `leader` line to
/// its next `follower` line (or its last line, if it never printed one) — or to the moment it
/// was stopped (SIGSTOP), if that came first: a stopped process does nothing, and what it does
/// after it resumes is judged by its `act` lines (see [`check_acts`]).
pub(super) fn check_leadership(events: &[Received], faults: &[Fault], report: &mut Report) {
    let stopped_after = |worker: usize, from: i64, to: i64| {
        faults
            .iter()
            .filter(|f| f.worker == worker && f.signal == Signal::Stop && f.at > from)
            .map(|f| f.at)
            .min()
            .map_or(to, |stopped| stopped.min(to))
    };
    let mut open: HashMap<usize, (i64, u64)> = HashMap::new();
    let mut last_seen: HashMap<usize, i64> = HashMap::new();
    let mut terms = Vec::new();
    for r in events {
        last_seen.insert(r.worker, r.received_at);
        match r.event {
            Event::Leader { term, at } => {
                open.insert(r.worker, (at, term));
            }
            Event::Follower { at } => {
                if let Some((from, term)) = open.remove(&r.worker) {
                    terms.push((from, stopped_after(r.worker, from, at), r.worker, term));
                }
            }
            _ => {}
        }
    }
    for (worker, (from, term)) in open {
        terms.push((
            from,
            stopped_after(worker, from, last_seen[&worker]),
            worker,
            term,
        ));
    }
    terms.sort_unstable();
    report.terms = terms.len();
    let mut latest: Option<(i64, i64, usize, u64)> = None;
    for &term in &terms {
        if let Some(prev) = latest
            && term.0 < prev.1
        {
            report.leadership_overlaps += 1;
            report.violations.push(format!(
                "worker {} led (term {}) {} µs before worker {} stopped leading (term {})",
                term.2,
                term.3,
                prev.1 - term.0,
                prev.2,
                prev.3
            ));
        }
        if latest.is_none_or(|prev| term.1 > prev.1) {
            latest = Some(term);
        }
    }
}

/// Leaders' `act` lines: an act under term `t` is **stale** when another worker had already
/// been elected with a term `> t` before the act's `is_leader()` was asked (both times on the
/// one host clock); and acts of different terms never interleave in time.
pub(super) fn check_acts(events: &[Received], report: &mut Report) {
    let elected: Vec<(i64, u64, usize)> = events
        .iter()
        .filter_map(|r| match r.event {
            Event::Leader { term, at } => Some((at, term, r.worker)),
            _ => None,
        })
        .collect();
    // Per term: its worker and the span of its acts.
    let mut spans: BTreeMap<u64, (usize, i64, i64)> = BTreeMap::new();
    for r in events {
        let Event::Act { term, at } = r.event else {
            continue;
        };
        report.acts += 1;
        if let Some(&(elected_at, newer, by)) = elected
            .iter()
            .find(|&&(e_at, e_term, _)| e_term > term && e_at < at)
        {
            report.stale_acts += 1;
            report.violations.push(format!(
                "worker {} acted as leader (term {term}) {} µs after worker {by} was elected (term {newer})",
                r.worker,
                at - elected_at
            ));
        }
        let span = spans.entry(term).or_insert((r.worker, at, at));
        if span.0 != r.worker {
            report.violations.push(format!(
                "workers {} and {} both acted under term {term}",
                span.0, r.worker
            ));
        }
        span.1 = span.1.min(at);
        span.2 = span.2.max(at);
    }
    let mut by_start: Vec<(i64, i64, u64, usize)> = spans
        .iter()
        .map(|(&term, &(worker, first, last))| (first, last, term, worker))
        .collect();
    by_start.sort_unstable();
    for pair in by_start.windows(2) {
        let (earlier, later) = (pair[0], pair[1]);
        if later.0 < earlier.1 {
            report.violations.push(format!(
                "worker {} (term {}) and worker {} (term {}) acted as leaders in the same {} µs",
                earlier.3,
                earlier.2,
                later.3,
                later.2,
                earlier.1 - later.0
            ));
        }
    }
}
