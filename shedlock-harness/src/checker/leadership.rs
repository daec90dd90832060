//! Leader election: no two workers lead at once, and no leader work in a superseded term.

use std::collections::HashMap;

use super::{Fault, Report};
use crate::event::Event;
use crate::fleet::{Received, Signal};

/// A term runs from the worker's `leader` line to its next `follower` line (or its last line,
/// if it never printed one). No two terms may overlap while both workers run: a term during
/// which its worker was stopped (SIGSTOP) ends, for this rule, when it was stopped, since a
/// stopped process does nothing and cannot print; what it does after it resumes is judged by
/// the next rule.
///
/// Leader work (a `leader_work` line) must carry the newest term granted before it started:
/// work in a term after another worker had been elected with a newer one is a violation.
pub(super) fn check_leadership(events: &[Received], faults: &[Fault], report: &mut Report) {
    let mut open: HashMap<usize, (i64, u64)> = HashMap::new();
    let mut last_seen: HashMap<usize, i64> = HashMap::new();
    let mut terms = Vec::new();
    let mut elections = Vec::new();
    let mut work = Vec::new();
    for r in events {
        last_seen.insert(r.worker, r.received_at);
        match r.event {
            Event::Leader { term, at } => {
                open.insert(r.worker, (at, term));
                elections.push((at, term, r.worker));
            }
            Event::Follower { at } => {
                if let Some((from, term)) = open.remove(&r.worker) {
                    terms.push((from, at, r.worker, term));
                }
            }
            Event::LeaderWork { term, at } => work.push((at, term, r.worker)),
            _ => {}
        }
    }
    for (worker, (from, term)) in open {
        terms.push((from, last_seen[&worker], worker, term));
    }
    for term in &mut terms {
        let stopped = faults
            .iter()
            .filter(|f| f.worker == term.2 && f.signal == Signal::Stop)
            .map(|f| f.at)
            .filter(|&at| at > term.0 && at < term.1)
            .min();
        if let Some(stopped) = stopped {
            term.1 = stopped;
        }
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

    elections.sort_unstable();
    report.leader_work = work.len();
    for (at, term, worker) in work {
        let newer = elections
            .iter()
            .take_while(|e| e.0 < at)
            .filter(|e| e.1 > term && e.2 != worker)
            .last();
        if let Some(&(elected_at, newer_term, newer_worker)) = newer {
            report.stale_leader_work += 1;
            report.violations.push(format!(
                "worker {worker} did leader work in term {term} {} µs after worker \
                 {newer_worker} was elected with term {newer_term}",
                at - elected_at
            ));
        }
    }
}
