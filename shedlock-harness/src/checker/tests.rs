//! The checker must be able to fail: each rule is broken once in a synthetic run.

use std::collections::{BTreeMap, BTreeSet};

use super::*;

const TICK: i64 = 1_000_000;

/// A synthetic run: workers `w0`, `w1`, … on one host, ticks of 1 s.
struct Run {
    events: Vec<Received>,
    journal: Vec<JournalRow>,
    workers: usize,
    /// Workers that print nothing more (killed): left out of `execute`.
    silent: BTreeSet<usize>,
}

impl Run {
    fn new(workers: usize) -> Run {
        let mut run = Run {
            events: Vec::new(),
            journal: Vec::new(),
            workers,
            silent: BTreeSet::new(),
        };
        for w in 0..workers {
            run.ev(
                w,
                Event::Ready {
                    holder: format!("w{w}"),
                    pid: w as u32,
                },
            );
        }
        run
    }

    fn ev(&mut self, worker: usize, event: Event) {
        self.events.push(Received {
            worker,
            received_at: 0,
            event,
        });
    }

    /// Worker `w`'s tick `tick` of `lock` fired at `at`.
    fn attempt(&mut self, w: usize, lock: &str, tick: i64, at: i64) {
        self.ev(
            w,
            Event::Attempt {
                lock: lock.into(),
                tick,
                at,
            },
        );
    }

    /// Worker `w` found `lock` held elsewhere at `at`.
    fn skip(&mut self, w: usize, lock: &str, at: i64) {
        self.ev(
            w,
            Event::Skipped {
                lock: lock.into(),
                at,
            },
        );
    }

    /// Worker `w` runs `lock` at `tick` with `token` from `start` to `end` (µs after the tick);
    /// the other workers skip it.
    fn execute(&mut self, w: usize, lock: &str, tick: i64, token: u64, start: i64, end: i64) {
        let fire = tick * TICK;
        let silent = self.silent.clone();
        for other in (0..self.workers).filter(|&other| other != w && !silent.contains(&other)) {
            self.attempt(other, lock, tick, fire);
            self.skip(other, lock, fire + 10);
        }
        self.acquire(w, lock, token, fire + 1, fire + 3 * TICK);
        self.write(
            w,
            lock,
            tick,
            token,
            fire + start,
            fire + end,
            WriteOutcome::Accepted,
        );
        self.journal.push(JournalRow {
            id: self.journal.len() as i64 + 1,
            lock: lock.into(),
            token: token as i64,
            holder: format!("w{w}"),
            tick,
            start: fire + start,
            end: fire + end,
        });
    }

    /// Worker `w` attempts and acquires `lock`.
    fn acquire(&mut self, w: usize, lock: &str, token: u64, at: i64, until: i64) {
        self.attempt(w, lock, at / TICK, at);
        self.ev(
            w,
            Event::Acquired {
                lock: lock.into(),
                token,
                at,
                since: at,
                until,
            },
        );
    }

    #[allow(clippy::too_many_arguments)]
    fn write(
        &mut self,
        w: usize,
        lock: &str,
        tick: i64,
        token: u64,
        start: i64,
        end: i64,
        outcome: WriteOutcome,
    ) {
        self.ev(
            w,
            Event::Write {
                lock: lock.into(),
                token,
                tick,
                start,
                end,
                lost: false,
                outcome,
            },
        );
    }

    /// Every worker attempts every tick between its first and last attempt of each lock: the
    /// ticks it has no line for, it skipped.
    fn skip_unattempted_ticks(&mut self) {
        let mut attempted: BTreeMap<(usize, String), BTreeSet<i64>> = BTreeMap::new();
        for r in &self.events {
            if let Event::Attempt { lock, tick, .. } = &r.event {
                attempted
                    .entry((r.worker, lock.clone()))
                    .or_default()
                    .insert(*tick);
            }
        }
        for ((w, lock), ticks) in attempted {
            let (first, last) = (ticks.first().copied(), ticks.last().copied());
            for tick in first.unwrap_or(0)..last.unwrap_or(0) {
                if !ticks.contains(&tick) {
                    self.ev(
                        w,
                        Event::Attempt {
                            lock: lock.clone(),
                            tick,
                            at: tick * TICK,
                        },
                    );
                    self.ev(
                        w,
                        Event::Skipped {
                            lock: lock.clone(),
                            at: tick * TICK + 10,
                        },
                    );
                }
            }
        }
    }

    /// Every worker prints the summary its lines add up to.
    fn finish(&mut self) {
        for w in 0..self.workers {
            let mut c = Counters::default();
            for r in self.events.iter().filter(|r| r.worker == w) {
                match &r.event {
                    Event::Attempt { .. } => c.attempts += 1,
                    Event::Acquired { .. } => c.acquired += 1,
                    Event::Skipped { .. } => c.skipped += 1,
                    Event::AcquireFailed { .. } => c.errors += 1,
                    Event::Write {
                        outcome: WriteOutcome::Accepted,
                        ..
                    } => c.accepted += 1,
                    Event::Write {
                        outcome: WriteOutcome::Rejected,
                        ..
                    } => c.rejected += 1,
                    Event::Write { .. } => c.failed += 1,
                    Event::Missed { count, .. } => c.missed += count,
                    Event::Overlapped { count, .. } => c.overlapped += count,
                    _ => {}
                }
            }
            self.ev(w, Event::Summary(c));
        }
    }

    fn check(&self, ticks: Range<i64>, killed: &[usize], faults: &[Fault]) -> Report {
        let expect = Expectations {
            at_least_us: 800_000,
            tick_us: TICK,
            ticks: Some(ticks),
            outages: Vec::new(),
        };
        check(&self.events, &self.journal, killed, faults, &expect)
    }
}

fn clean_run() -> Run {
    let mut run = Run::new(3);
    for tick in 0..5 {
        run.execute(tick as usize % 3, "a", tick, tick as u64 + 1, 100, 600_000);
        run.execute(
            (tick as usize + 1) % 3,
            "b",
            tick,
            tick as u64 + 1,
            100,
            600_000,
        );
    }
    run
}

fn only_violation(report: &Report, wanted: &str) {
    assert!(
        !report.passed(),
        "expected a violation containing {wanted:?}:\n{report}"
    );
    assert!(
        report.violations.iter().any(|v| v.contains(wanted)),
        "no violation contains {wanted:?}:\n{report}"
    );
}

#[test]
fn a_clean_run_passes_with_exact_figures() {
    let mut run = clean_run();
    run.finish();
    let report = run.check(0..5, &[], &[]);
    assert!(report.passed(), "{report}");
    assert_eq!(
        (report.processes, report.locks, report.journal_rows),
        (3, 2, 10)
    );
    assert_eq!(report.counts.attempts, 30);
    assert_eq!((report.counts.acquired, report.counts.skipped), (10, 20));
    assert_eq!(
        (
            report.ticks_checked,
            report.duplicate_ticks,
            report.missed_ticks
        ),
        (10, 0, 0)
    );
    assert!(
        report.to_string().contains("violations              none"),
        "{report}"
    );
}

#[test]
fn detects_overlapping_executions() {
    let mut run = clean_run();
    // Token 9 starts at tick 5 + 0.1 s while token 8 (tick 5) runs until + 0.6 s.
    run.execute(0, "a", 5, 8, 100, 600_000);
    run.execute(1, "a", 5, 9, 100_000, 700_000);
    run.finish();
    let report = run.check(0..5, &[], &[]);
    assert_eq!(report.overlaps, 1, "{report}");
    only_violation(&report, "ended");
}

#[test]
fn detects_tokens_that_do_not_increase() {
    let mut run = clean_run();
    run.execute(0, "a", 7, 3, 100, 600_000);
    run.finish();
    let report = run.check(0..5, &[], &[]);
    assert!(report.token_regressions >= 1, "{report}");
    only_violation(&report, "token 3");
}

#[test]
fn detects_an_accepted_stale_write() {
    let mut run = clean_run();
    // Worker 0 holds token 10, pauses; worker 1 acquires token 11; then worker 0's write lands.
    run.acquire(0, "a", 10, 10 * TICK, 13 * TICK);
    run.acquire(1, "a", 11, 14 * TICK, 17 * TICK);
    run.write(0, "a", 10, 10, 10 * TICK, 15 * TICK, WriteOutcome::Accepted);
    run.journal.push(JournalRow {
        id: 99,
        lock: "a".into(),
        token: 10,
        holder: "w0".into(),
        tick: 10,
        start: 10 * TICK,
        end: 15 * TICK,
    });
    let report = run.check(0..5, &[], &[]);
    assert_eq!(
        (report.stale_attempted, report.stale_accepted),
        (1, 1),
        "{report}"
    );
    only_violation(&report, "after a newer token was acquired");

    // The same write, rejected: counted as attempted, not accepted, no violation of its own.
    let mut run = clean_run();
    run.acquire(0, "a", 6, 10 * TICK, 13 * TICK);
    run.acquire(1, "a", 7, 14 * TICK, 17 * TICK);
    run.write(0, "a", 10, 6, 10 * TICK, 15 * TICK, WriteOutcome::Rejected);
    run.write(1, "a", 14, 7, 14 * TICK, 15 * TICK, WriteOutcome::Rejected);
    run.skip_unattempted_ticks();
    run.finish();
    let report = run.check(0..5, &[], &[]);
    assert_eq!(
        (report.stale_attempted, report.stale_accepted),
        (1, 0),
        "{report}"
    );
    assert!(report.passed(), "{report}");
}

#[test]
fn detects_duplicate_and_missed_ticks_and_excuses_dead_leases() {
    let mut run = clean_run();
    run.execute(2, "a", 4, 20, 700_000, 800_000);
    run.finish();
    let report = run.check(0..6, &[], &[]);
    assert_eq!(report.duplicate_ticks, 1, "{report}");
    assert_eq!(report.missed_ticks, 2, "tick 5 of a and b: {report}");
    only_violation(&report, "tick 4 ran 2 times");
    only_violation(&report, "b: tick 5 did not run");

    // A lease that never committed (its holder was killed) excuses the ticks it covered.
    let mut run = clean_run();
    run.acquire(0, "a", 6, 5 * TICK + 5, 7 * TICK + 500_000);
    run.execute(1, "a", 8, 7, 100, 600_000);
    run.execute(1, "b", 5, 6, 100, 600_000);
    run.execute(1, "b", 6, 7, 100, 600_000);
    run.execute(1, "b", 7, 8, 100, 600_000);
    run.execute(1, "b", 8, 9, 100, 600_000);
    run.skip_unattempted_ticks();
    run.finish();
    let faults = [Fault {
        worker: 0,
        signal: Signal::Kill,
        at: 5 * TICK + 10,
    }];
    let report = run.check(0..9, &[0], &faults);
    assert!(report.passed(), "{report}");
    assert_eq!(
        (report.excused_ticks, report.missed_ticks),
        (3, 0),
        "{report}"
    );
    assert_eq!(report.takeover_after_expiry_ms(), [500], "{report}");
    assert_eq!(report.takeover_after_fault_ms(), [2999], "{report}");
}

#[test]
fn detects_a_takeover_before_the_lease_ended() {
    let mut run = clean_run();
    run.acquire(0, "a", 6, 6 * TICK, 9 * TICK);
    run.execute(1, "a", 7, 7, 100, 600_000);
    run.finish();
    let faults = [Fault {
        worker: 0,
        signal: Signal::Stop,
        at: 6 * TICK + 10,
    }];
    let report = run.check(0..5, &[], &faults);
    only_violation(&report, "before its lease ended");
}

#[test]
fn detects_counts_that_do_not_add_up() {
    let mut run = clean_run();
    run.attempt(1, "a", 9, 9 * TICK);
    run.finish();
    only_violation(&run.check(0..5, &[], &[]), "attempts but");

    let mut run = clean_run();
    run.finish();
    run.ev(2, Event::Summary(Counters::default()));
    only_violation(&run.check(0..5, &[], &[]), "differs from its event lines");

    let mut run = clean_run();
    only_violation(&run.check(0..5, &[], &[]), "without a summary");
    // A killed worker needs no summary and may die between attempt and outcome.
    run.attempt(0, "a", 9, 9 * TICK);
    let events: Vec<_> = run
        .events
        .iter()
        .filter(|r| r.worker == 0)
        .cloned()
        .collect();
    let journal: Vec<_> = run
        .journal
        .iter()
        .filter(|r| r.holder == "w0")
        .cloned()
        .collect();
    let report = check(&events, &journal, &[0], &[], &Expectations::default());
    assert!(report.passed(), "{report}");
}

#[test]
fn detects_writes_the_journal_contradicts() {
    let mut run = clean_run();
    run.journal.pop();
    run.finish();
    only_violation(
        &run.check(0..5, &[], &[]),
        "accepted but not in the journal",
    );

    let mut run = clean_run();
    run.journal.push(JournalRow {
        id: 50,
        lock: "b".into(),
        token: 50,
        holder: "w1".into(),
        tick: 9,
        start: 9 * TICK,
        end: 9 * TICK + 1,
    });
    run.finish();
    only_violation(&run.check(0..5, &[], &[]), "without an accepted write line");
}

#[test]
fn an_attempt_without_an_answer_is_an_acquisition_nobody_reported() {
    let mut run = clean_run();
    // Worker 0 asked for `a` at tick 5 and printed nothing more (killed): it may have held a
    // lease nobody reported, until worker 1 took the lock at tick 8.
    run.attempt(0, "a", 5, 5 * TICK);
    run.silent.insert(0);
    for tick in 5..8 {
        run.attempt(1, "a", tick, tick * TICK);
        run.skip(1, "a", tick * TICK + 10);
    }
    run.execute(1, "a", 8, 7, 100, 600_000);
    for tick in 5..9 {
        run.execute(2, "b", tick, tick as u64 + 1, 100, 600_000);
    }
    run.skip_unattempted_ticks();
    run.finish();
    let report = run.check(0..9, &[0], &[]);
    assert!(report.passed(), "{report}");
    assert_eq!(report.unobserved_acquisitions, 1, "{report}");
    // Ticks 6 and 7 ran nowhere: the unreported lease excuses them (tick 5 is held by the
    // run of tick 4, still within its lock_at_least_for).
    assert_eq!(
        (report.excused_ticks, report.missed_ticks),
        (2, 0),
        "{report}"
    );

    // Not killed, the same silence breaks the rules.
    let report = run.check(0..9, &[], &[]);
    assert!(
        report
            .violations
            .iter()
            .any(|v| v.contains("asked for the lock at") && v.contains("reported no answer")),
        "{report}"
    );
}

#[test]
fn a_late_answer_given_back_reports_its_token() {
    let mut run = clean_run();
    // Token 6 of `a` was answered after its local deadline (a database restart): the worker
    // reported it lost and gave it back, then token 7 ran.
    run.attempt(1, "a", 5, 5 * TICK);
    run.ev(
        1,
        Event::Lost {
            lock: "a".into(),
            token: 6,
            at: 7 * TICK + 10,
        },
    );
    run.skip(1, "a", 7 * TICK + 10);
    run.execute(2, "a", 8, 7, 100, 600_000);
    for tick in 5..9 {
        run.execute(2, "b", tick, tick as u64 + 1, 100, 600_000);
    }
    run.skip_unattempted_ticks();
    run.finish();
    let report = run.check(0..9, &[], &[]);
    assert_eq!(report.unobserved_acquisitions, 0, "{report}");
    assert!(
        !report
            .violations
            .iter()
            .any(|v| v.contains("reported no answer")),
        "{report}"
    );
}

#[test]
fn detects_two_leaders_at_once() {
    let mut run = Run::new(2);
    run.ev(0, Event::Leader { term: 1, at: 100 });
    run.ev(0, Event::Follower { at: 200 });
    run.ev(1, Event::Leader { term: 2, at: 250 });
    run.ev(1, Event::Follower { at: 400 });
    run.finish();
    let report = check(&run.events, &[], &[], &[], &Expectations::default());
    assert!(report.passed(), "{report}");
    assert_eq!(report.terms, 2);

    run.ev(0, Event::Leader { term: 3, at: 300 });
    run.ev(0, Event::Follower { at: 500 });
    let report = check(&run.events, &[], &[], &[], &Expectations::default());
    assert_eq!(report.leadership_overlaps, 1, "{report}");
    only_violation(
        &report,
        "led (term 3) 100 µs before worker 1 stopped leading (term 2)",
    );
}

#[test]
fn detects_ticks_neither_attempted_nor_reported_missed() {
    let mut run = Run::new(1);
    for (tick, token) in [(0, 1), (1, 2), (4, 3)] {
        run.execute(0, "a", tick, token, 100, 600_000);
    }
    let mut reported = Run {
        events: run.events.clone(),
        journal: run.journal.clone(),
        workers: 1,
        silent: BTreeSet::new(),
    };
    run.finish();
    let report = run.check(0..2, &[], &[]);
    assert_eq!(report.unreported_missed, 2, "{report}");
    only_violation(
        &report,
        "worker 0, a: 2 ticks not attempted between its attempts",
    );

    reported.ev(
        0,
        Event::Missed {
            lock: "a".into(),
            count: 1,
            at: 4 * TICK,
        },
    );
    reported.ev(
        0,
        Event::Overlapped {
            lock: "a".into(),
            count: 1,
            at: 4 * TICK,
        },
    );
    reported.finish();
    let report = reported.check(0..2, &[], &[]);
    assert!(report.passed(), "{report}");
    assert_eq!(report.reported_missed, 1);
}

/// Two workers; worker 0 is elected in term 1 at 100 µs and does leader work at `work_at`.
fn leader_at_work(work_at: i64) -> Run {
    let mut run = Run::new(2);
    run.ev(0, Event::Leader { term: 1, at: 100 });
    run.ev(
        0,
        Event::LeaderWork {
            term: 1,
            at: work_at,
        },
    );
    run
}

#[test]
fn detects_leader_work_in_a_superseded_term() {
    let mut run = leader_at_work(120);
    // Worker 0 is stopped at 150; worker 1 is elected while it is, and works.
    run.ev(1, Event::Leader { term: 2, at: 300 });
    run.ev(1, Event::LeaderWork { term: 2, at: 310 });
    run.ev(0, Event::Follower { at: 500 });
    let stopped = [Fault {
        worker: 0,
        signal: Signal::Stop,
        at: 150,
    }];
    let mut clean = Run {
        events: run.events.clone(),
        journal: Vec::new(),
        workers: 2,
        silent: BTreeSet::new(),
    };
    clean.finish();
    let report = check(&clean.events, &[], &[], &stopped, &Expectations::default());
    assert!(
        report.passed(),
        "a stopped leader's late line is no overlap:\n{report}"
    );
    assert_eq!((report.terms, report.leader_work), (2, 2));

    // After it resumes, worker 0 works once more in its old term.
    run.ev(0, Event::LeaderWork { term: 1, at: 450 });
    run.finish();
    let report = check(&run.events, &[], &[], &stopped, &Expectations::default());
    assert_eq!(report.stale_leader_work, 1, "{report}");
    only_violation(
        &report,
        "worker 0 did leader work in term 1 150 µs after worker 1 was elected with term 2",
    );
    only_violation(&report, "did leader work in the same");
}

#[test]
fn detects_two_workers_working_in_one_term() {
    let mut run = leader_at_work(150);
    run.ev(1, Event::LeaderWork { term: 1, at: 160 });
    run.finish();
    let report = check(&run.events, &[], &[], &[], &Expectations::default());
    only_violation(&report, "workers 0 and 1 both did leader work in term 1");
}

#[test]
fn a_tick_skipped_while_the_lock_was_free_is_a_violation_unless_a_late_run_held_it() {
    // Tick 0 runs 700 ms late and releases at 0.9 s; both workers skip tick 1 at 1.01 s.
    let run_with = |at_least_us: i64| {
        let mut run = Run::new(2);
        for w in 0..2 {
            run.attempt(w, "a", 0, 700_000);
        }
        run.ev(
            0,
            Event::Acquired {
                lock: "a".into(),
                token: 1,
                at: 701_000,
                since: 700_000,
                until: 3 * TICK,
            },
        );
        run.skip(1, "a", 702_000);
        run.write(0, "a", 0, 1, 701_000, 880_000, WriteOutcome::Accepted);
        run.journal.push(JournalRow {
            id: 1,
            lock: "a".into(),
            token: 1,
            holder: "w0".into(),
            tick: 0,
            start: 701_000,
            end: 880_000,
        });
        run.ev(
            0,
            Event::Released {
                lock: "a".into(),
                token: 1,
                at: 900_000,
            },
        );
        for w in 0..2 {
            run.attempt(w, "a", 1, TICK + 10_000);
            run.skip(w, "a", TICK + 20_000);
        }
        run.finish();
        let expect = Expectations {
            at_least_us,
            tick_us: TICK,
            ticks: Some(0..2),
            outages: Vec::new(),
        };
        check(&run.events, &run.journal, &[], &[], &expect)
    };
    let report = run_with(800_000);
    assert!(report.passed(), "{report}");
    assert_eq!(report.suppressed_ticks, 1, "{report}");

    let report = run_with(0);
    assert_eq!(report.missed_ticks, 1, "{report}");
    only_violation(&report, "a: tick 1 did not run, though the lock was free");
}
