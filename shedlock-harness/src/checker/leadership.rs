//! Leader election: no two workers lead at once.

use std::collections::HashMap;

use super::Report;
use crate::event::Event;
use crate::fleet::Received;

/// Leader-election workers: no two lead at once. A term runs from the worker's `leader` line to
/// its next `follower` line (or its last line, if it never printed one).
pub(super) fn check_leadership(events: &[Received], report: &mut Report) {
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
                    terms.push((from, at, r.worker, term));
                }
            }
            _ => {}
        }
    }
    for (worker, (from, term)) in open {
        terms.push((from, last_seen[&worker], worker, term));
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
