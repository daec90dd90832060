//! The figures of a run, as the checker reports them.

use std::fmt;

use crate::event::Counters;

/// A lease held by a faulted worker, and when another worker took the lock over.
#[derive(Debug, Clone)]
pub struct Takeover {
    /// The lock.
    pub lock: String,
    /// The faulted worker's token.
    pub token: u64,
    /// When its lease ended (database clock, µs).
    pub until: i64,
    /// When the fault was injected (µs).
    pub fault_at: i64,
    /// When the next holder acquired it (µs), if it did during the run.
    pub next_at: Option<i64>,
}

/// The figures of a run and everything that went wrong in it.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Worker processes that reported.
    pub processes: usize,
    /// Of which killed by the harness.
    pub killed: usize,
    /// Of which paused by the harness.
    pub paused: usize,
    /// Distinct lock names.
    pub locks: usize,
    /// Totals of every worker's events.
    pub counts: Counters,
    /// Rows in the journal table.
    pub journal_rows: usize,
    /// Executions of one lock whose time spans intersect.
    pub overlaps: usize,
    /// Rows whose token is not greater than the previous row's of the same lock.
    pub token_regressions: usize,
    /// Writes attempted with a superseded token.
    pub stale_attempted: usize,
    /// Journal rows written with a superseded token (must be 0).
    pub stale_accepted: usize,
    /// Lost-lock signals fired.
    pub lost_signals: usize,
    /// Attempts whose answer no line reports: acquisitions, perhaps, whose worker was killed
    /// before it could report them.
    pub unobserved_acquisitions: u64,
    /// Ticks checked for exactly-once.
    pub ticks_checked: usize,
    /// Ticks that ran more than once.
    pub duplicate_ticks: usize,
    /// Ticks that did not run, without a fault to excuse it.
    pub missed_ticks: usize,
    /// Ticks that did not run because a faulted worker held the lock or the database was down.
    pub excused_ticks: usize,
    /// Ticks that did not run because an earlier tick's run, started late, still held the lock.
    pub suppressed_ticks: usize,
    /// Ticks no worker attempted: every one reported them missed (see `unreported_missed`).
    pub missed_everywhere: usize,
    /// Ticks the schedulers reported missed (a pause passed over them, or they were too late).
    pub reported_missed: u64,
    /// Ticks a worker neither attempted nor reported missed or overlapped (must be 0).
    pub unreported_missed: u64,
    /// Leadership terms begun (leader-election workers).
    pub terms: usize,
    /// Leader work started (leader-only jobs, or election workers asking `is_leader()`).
    pub leader_work: usize,
    /// Leader work started in a term after a newer term had been granted (must be 0).
    pub stale_leader_work: usize,
    /// Times two workers led at once.
    pub leadership_overlaps: usize,
    /// Leaders' actions (`act` lines).
    pub acts: usize,
    /// Actions under a term a newer leader had superseded (must be 0).
    pub stale_acts: usize,
    /// Takeovers after faults.
    pub takeovers: Vec<Takeover>,
    /// What went wrong, one line each.
    pub violations: Vec<String>,
}

impl Report {
    /// Whether the run broke no rule.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// Milliseconds from lease expiry to the next acquisition, per takeover that happened.
    pub fn takeover_after_expiry_ms(&self) -> Vec<i64> {
        self.takeovers
            .iter()
            .filter_map(|t| t.next_at.map(|next| (next - t.until) / 1000))
            .collect()
    }

    /// Milliseconds from the fault to the next acquisition, per takeover that happened.
    pub fn takeover_after_fault_ms(&self) -> Vec<i64> {
        self.takeovers
            .iter()
            .filter_map(|t| t.next_at.map(|next| (next - t.fault_at) / 1000))
            .collect()
    }
}

/// `min / median / max` of some milliseconds, or `n/a`.
fn spread(mut values: Vec<i64>) -> String {
    if values.is_empty() {
        return "n/a".to_owned();
    }
    values.sort_unstable();
    let median = values[values.len() / 2];
    format!(
        "{} / {median} / {} ms (n={})",
        values[0],
        values[values.len() - 1],
        values.len()
    )
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = &self.counts;
        writeln!(
            f,
            "processes               {} (killed {}, paused {})",
            self.processes, self.killed, self.paused
        )?;
        writeln!(f, "locks                   {}", self.locks)?;
        let in_flight = c.attempts - (c.acquired + c.skipped + c.errors).min(c.attempts);
        writeln!(
            f,
            "attempts                {} = executed {} + skipped {} + store errors {} + cut short by SIGKILL {}",
            c.attempts, c.acquired, c.skipped, c.errors, in_flight
        )?;
        let not_once = self.duplicate_ticks
            + self.missed_ticks
            + self.excused_ticks
            + self.suppressed_ticks
            + self.missed_everywhere;
        writeln!(
            f,
            "ticks checked           {}: exactly once {}, duplicates {}, skipped with the lock free {}, \
             excused by faults {}, held by a late earlier run {}, missed by every worker {}",
            self.ticks_checked,
            self.ticks_checked - not_once,
            self.duplicate_ticks,
            self.missed_ticks,
            self.excused_ticks,
            self.suppressed_ticks,
            self.missed_everywhere
        )?;
        writeln!(
            f,
            "journal rows            {}, overlaps {}, token order violations {}",
            self.journal_rows, self.overlaps, self.token_regressions
        )?;
        writeln!(
            f,
            "fenced writes           {}: accepted {}, rejected {}, failed {}",
            c.accepted + c.rejected + c.failed,
            c.accepted,
            c.rejected,
            c.failed
        )?;
        writeln!(
            f,
            "runs stopped            {} (their heartbeat lost before their write)",
            c.stopped
        )?;
        writeln!(
            f,
            "stale writes            attempted {}, accepted {}",
            self.stale_attempted, self.stale_accepted
        )?;
        writeln!(
            f,
            "ticks not attempted     reported missed {} (overlapped {}), unreported {}",
            self.reported_missed, c.overlapped, self.unreported_missed
        )?;
        writeln!(f, "lost-lock signals       {}", self.lost_signals)?;
        if self.terms > 0 {
            writeln!(
                f,
                "leadership              {} terms, {} overlapping; leader work {}, in a superseded term {}",
                self.terms, self.leadership_overlaps, self.leader_work, self.stale_leader_work
            )?;
        }
        if self.acts > 0 {
            writeln!(
                f,
                "leader actions          {}, stale {}",
                self.acts, self.stale_acts
            )?;
        }
        writeln!(
            f,
            "unreported acquisitions {} (killed between acquiring and reporting)",
            self.unobserved_acquisitions
        )?;
        let unmeasured = self
            .takeovers
            .iter()
            .filter(|t| t.next_at.is_none())
            .count();
        writeln!(
            f,
            "takeover after expiry   {} (min / median / max){}",
            spread(self.takeover_after_expiry_ms()),
            if unmeasured > 0 {
                format!(", {unmeasured} not measured (next holder unreported or after the run)")
            } else {
                String::new()
            }
        )?;
        writeln!(
            f,
            "takeover after fault    {}",
            spread(self.takeover_after_fault_ms())
        )?;
        if self.violations.is_empty() {
            write!(f, "violations              none")
        } else {
            writeln!(f, "violations              {}:", self.violations.len())?;
            for v in self.violations.iter().take(20) {
                writeln!(f, "  - {v}")?;
            }
            Ok(())
        }
    }
}

/// The sum of two workers' counts.
pub(super) fn add(a: Counters, b: Counters) -> Counters {
    Counters {
        attempts: a.attempts + b.attempts,
        acquired: a.acquired + b.acquired,
        skipped: a.skipped + b.skipped,
        errors: a.errors + b.errors,
        accepted: a.accepted + b.accepted,
        rejected: a.rejected + b.rejected,
        failed: a.failed + b.failed,
        stopped: a.stopped + b.stopped,
        missed: a.missed + b.missed,
        overlapped: a.overlapped + b.overlapped,
    }
}
