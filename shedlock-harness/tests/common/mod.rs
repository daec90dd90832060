//! What the harness tests share: a scenario (a run's tables, a fleet of workers, the faults
//! injected) that ends in the checker's report.

#![allow(dead_code)] // each test binary uses a different part

pub(crate) mod election;

use std::time::Duration;

use shedlock_harness::{
    Backend, Event, Expectations, Fault, Fleet, JournalRow, Received, Report, Run, Signal,
    WorkerOptions, WriteOutcome, check, database_url, now_us,
};

/// The harness binary, spawned as workers.
pub(crate) const EXE: &str = env!("CARGO_BIN_EXE_shedlock-harness");

/// Generous bound for anything that should take a second or two.
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// A run in progress.
pub(crate) struct Scenario {
    pub(crate) run: Run,
    pub(crate) fleet: Fleet,
    pub(crate) tick_us: i64,
    /// The workers' `lock_at_least_for` (µs).
    pub(crate) at_least_us: i64,
    pub(crate) first_tick: i64,
    /// Whether every tick must have run exactly once (not with jobs longer than a tick).
    pub(crate) check_ticks: bool,
    pub(crate) faults: Vec<Fault>,
    pub(crate) outages: Vec<std::ops::Range<i64>>,
}

impl Scenario {
    /// A run on `backend` without workers yet; `None` when the database is not configured
    /// (the test is skipped).
    pub(crate) async fn new(backend: Backend) -> Option<Scenario> {
        let url = database_url(backend)?;
        Some(Scenario::on(backend, &url).await)
    }

    /// A run on `backend` at `url` without workers yet.
    pub(crate) async fn on(backend: Backend, url: &str) -> Scenario {
        let run = Run::create(backend, url)
            .await
            .expect("create the run's tables");
        Scenario {
            run,
            fleet: Fleet::new(EXE),
            tick_us: 0,
            at_least_us: 0,
            first_tick: 0,
            check_ticks: true,
            faults: Vec::new(),
            outages: Vec::new(),
        }
    }

    /// Starts a worker on `locks` (tick 1 s, job 600 ms, lease 3 s, minimum hold 800 ms, then
    /// `configure`) and waits until it is ready. Returns its index.
    pub(crate) async fn spawn(
        &mut self,
        locks: &[&str],
        configure: impl Fn(&mut WorkerOptions),
    ) -> usize {
        let locks: Vec<String> = locks.iter().map(|&l| l.to_owned()).collect();
        let mut options = self.run.worker(self.fleet.len(), &locks);
        configure(&mut options);
        let worker = self.fleet.spawn(&options).expect("spawn a worker");
        self.fleet
            .wait_ready(&[worker], PATIENCE)
            .await
            .expect("worker ready");
        if self.tick_us == 0 {
            self.tick_us = options.tick.as_micros() as i64;
            self.at_least_us = options.at_least.as_micros() as i64;
            self.first_tick = now_us() / self.tick_us + 1;
        }
        worker
    }

    /// `workers` workers on `locks`, all ready; `None` when the database is not configured.
    pub(crate) async fn start(
        backend: Backend,
        workers: usize,
        locks: &[&str],
        configure: impl Fn(&mut WorkerOptions),
    ) -> Option<Scenario> {
        let mut scenario = Scenario::new(backend).await?;
        for _ in 0..workers {
            scenario.spawn(locks, &configure).await;
        }
        Some(scenario)
    }

    /// Sends `signal` to `worker` and records it as a fault.
    pub(crate) fn inject(&mut self, worker: usize, signal: Signal) {
        inject(&mut self.fleet, &mut self.faults, worker, signal);
    }

    /// Stops `worker` (SIGSTOP) at a moment it holds no database lock. On SQLite a process
    /// stopped inside a statement holds the database's only write lock and every other process
    /// waits for it: that is a frozen database, not a frozen instance. There the worker is
    /// resumed at once when that happened (recorded as a fault all the same) and stopped again
    /// a moment later. Returns when it was stopped for good.
    pub(crate) async fn stop_between_statements(&mut self, worker: usize) -> i64 {
        loop {
            self.inject(worker, Signal::Stop);
            let stopped_at = now_us();
            if self.run.write_lock_free().await {
                return stopped_at;
            }
            self.inject(worker, Signal::Cont);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Sleeps until `fraction` of a tick has passed since the last tick boundary (host clock).
    /// Not a synchronisation: it places a fault at a chosen phase of the tick.
    pub(crate) async fn sleep_until_phase(&self, fraction: f64) {
        let into = now_us().rem_euclid(self.tick_us);
        let target = (fraction * self.tick_us as f64) as i64;
        let wait = (target - into).rem_euclid(self.tick_us);
        tokio::time::sleep(Duration::from_micros(wait as u64)).await;
    }

    /// Waits for the first event from index `since` that `matches` accepts.
    pub(crate) async fn wait<T>(
        &mut self,
        since: usize,
        timeout: Duration,
        what: &str,
        matches: impl FnMut(&Received) -> Option<T>,
    ) -> T {
        match self.fleet.wait_for(since, timeout, what, matches).await {
            Ok(found) => found,
            Err(error) => panic!("{error:#}"),
        }
    }

    /// The start of a run of `lock` after its first committed one (the fleet is past its start,
    /// so a fault then hits a worker in the middle of a job): (worker, token, at).
    pub(crate) async fn start_after_first_commit(&mut self, lock: &str) -> (usize, u64, i64) {
        self.committed_after(lock, 0, PATIENCE).await;
        self.next_start(lock).await
    }

    /// Sends `signal` to the worker running `lock` after its first committed run, in the middle
    /// of its job: (worker, token, when the signal was sent).
    pub(crate) async fn fault_mid_job(&mut self, lock: &str, signal: Signal) -> (usize, u64, i64) {
        let (worker, token, _) = self.start_after_first_commit(lock).await;
        self.inject(worker, signal);
        (worker, token, now_us())
    }

    /// The next job start of `lock`: (worker, token, at).
    pub(crate) async fn next_start(&mut self, lock: &str) -> (usize, u64, i64) {
        let since = self.fleet.events().len();
        self.wait(
            since,
            PATIENCE,
            &format!("a start of {lock}"),
            |r| match &r.event {
                Event::Start { lock: l, token, at } if l == lock => Some((r.worker, *token, *at)),
                _ => None,
            },
        )
        .await
    }

    /// Waits for a committed execution of `lock` with a token above `token`.
    pub(crate) async fn committed_after(
        &mut self,
        lock: &str,
        token: u64,
        timeout: Duration,
    ) -> (usize, u64, i64) {
        self.wait(
            0,
            timeout,
            &format!("an accepted write of {lock} above token {token}"),
            |r| match &r.event {
                Event::Write {
                    lock: l,
                    token: t,
                    start,
                    outcome: WriteOutcome::Accepted,
                    ..
                } if l == lock && *t > token => Some((r.worker, *t, *start)),
                _ => None,
            },
        )
        .await
    }

    /// Resumes the stopped `worker` (SIGCONT) and waits for its fenced write under `token` of
    /// `lock`: the index of the first event after the resume, whether the job saw its lease
    /// lost, and how the write ended.
    pub(crate) async fn resume_until_write(
        &mut self,
        worker: usize,
        lock: &str,
        token: u64,
    ) -> (usize, bool, WriteOutcome) {
        let resumed_from = self.fleet.events().len();
        self.inject(worker, Signal::Cont);
        let what = "the resumed worker's write";
        let (lost, outcome) = self
            .wait(resumed_from, PATIENCE, what, |r| match &r.event {
                Event::Write {
                    lock: l,
                    token: t,
                    lost,
                    outcome,
                    ..
                } if r.worker == worker && l == lock && *t == token => {
                    Some((*lost, outcome.clone()))
                }
                _ => None,
            })
            .await;
        (resumed_from, lost, outcome)
    }

    /// Ticks around a fault from `from` to `until` may miss a run (an operation in flight, a
    /// lease that had to run out): excused, a tick before and after included. A duplicate never
    /// is.
    pub(crate) fn excuse_around(&mut self, from: i64, until: i64) {
        self.outages.push(from - self.tick_us..until + self.tick_us);
    }

    /// The `acquired` line of `worker` for `lock` with `token`: its lease end (µs).
    pub(crate) fn lease_until(&self, worker: usize, lock: &str, token: u64) -> i64 {
        self.fleet
            .events()
            .iter()
            .find_map(|r| match &r.event {
                Event::Acquired {
                    lock: l,
                    token: t,
                    until,
                    ..
                } if r.worker == worker && l == lock && *t == token => Some(*until),
                _ => None,
            })
            .expect("the worker reported its acquisition")
    }

    /// Stops every worker, checks the run (ticks from the first full tick after start to the
    /// last one before the stop), prints the figures, cleans up on success.
    pub(crate) async fn finish(mut self) -> Report {
        let last_tick = now_us() / self.tick_us;
        if let Err(error) = self.fleet.stop_all(PATIENCE).await {
            panic!("workers did not stop cleanly: {error:#}");
        }
        let journal = self.run.journal().await.expect("read the journal");
        let expect = Expectations {
            at_least_us: self.at_least_us,
            tick_us: self.tick_us,
            ticks: self.check_ticks.then_some(self.first_tick..last_tick),
            outages: self.outages.clone(),
        };
        let report = report(&self.fleet, &journal, &self.faults, &expect);
        if report.passed() {
            self.run.cleanup().await;
        } else {
            let lines: Vec<String> = self
                .fleet
                .events()
                .iter()
                .map(|r| format!("{} w{} {}", r.received_at, r.worker, r.event))
                .collect();
            let dump = std::env::temp_dir().join(format!("{}.events", self.run.journal_table));
            let _ = std::fs::write(&dump, lines.join("\n"));
            println!(
                "tables kept for inspection: {} and {}; event lines in {}",
                self.run.lock_table,
                self.run.journal_table,
                dump.display()
            );
        }
        report
    }
}

/// Sends `signal` to `worker` of `fleet` and records it in `faults` (a SIGCONT ends a fault, it
/// is not one).
pub(crate) fn inject(fleet: &mut Fleet, faults: &mut Vec<Fault>, worker: usize, signal: Signal) {
    fleet.signal(worker, signal).expect("signal the worker");
    if signal != Signal::Cont {
        faults.push(Fault {
            worker,
            signal,
            at: now_us(),
        });
    }
}

/// The checker's report on what `fleet` reported (a line that is no event is a violation too),
/// printed.
pub(crate) fn report(
    fleet: &Fleet,
    journal: &[JournalRow],
    faults: &[Fault],
    expect: &Expectations,
) -> Report {
    let mut report = check(fleet.events(), journal, &fleet.killed(), faults, expect);
    for (worker, line) in fleet.unparsed() {
        report.violations.push(format!(
            "worker {worker} printed an unparsable line: {line}"
        ));
    }
    println!("{report}");
    report
}

/// Panics with the report unless it passed.
pub(crate) fn assert_passed(report: &Report) {
    assert!(report.passed(), "the run broke the rules:\n{report}");
}
