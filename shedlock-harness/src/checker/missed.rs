//! Ticks a worker did not attempt: each must be one its scheduler reported, as missed (a pause
//! passed over it, or it came too late) or overlapped (the previous run still went on).

use std::collections::BTreeMap;

use super::Report;
use crate::event::Event;
use crate::fleet::Received;

/// Per worker and lock, the ticks between consecutive attempts must all be among those the
/// scheduler reported (it may report more: ticks passed over after the last attempt, e.g.
/// during a run that lasts to the end); killed workers are left out (their last report may be
/// lost).
pub(super) fn check_unattempted_ticks(events: &[Received], killed: &[usize], report: &mut Report) {
    #[derive(Default)]
    struct Seen {
        ticks: Vec<i64>,
        reported: u64,
    }
    let mut seen: BTreeMap<(usize, &str), Seen> = BTreeMap::new();
    for r in events {
        match &r.event {
            Event::Attempt { lock, tick, .. } => {
                seen.entry((r.worker, lock)).or_default().ticks.push(*tick)
            }
            Event::Missed { lock, count, .. } => {
                report.reported_missed += count;
                seen.entry((r.worker, lock)).or_default().reported += count;
            }
            Event::Overlapped { lock, count, .. } => {
                seen.entry((r.worker, lock)).or_default().reported += count;
            }
            _ => {}
        }
    }
    for ((worker, lock), mut seen) in seen {
        if killed.contains(&worker) {
            continue;
        }
        seen.ticks.sort_unstable();
        let gaps: u64 = seen
            .ticks
            .windows(2)
            .map(|pair| u64::try_from(pair[1] - pair[0] - 1).unwrap_or(0))
            .sum();
        if gaps > seen.reported {
            report.unreported_missed += gaps - seen.reported;
            report.violations.push(format!(
                "worker {worker}, {lock}: {gaps} ticks not attempted between its attempts, \
                 {} reported missed or overlapped",
                seen.reported
            ));
        }
    }
}
