//! The stress run: N worker processes × M locks on one database for a window of ticks,
//! optionally killing or pausing a worker every so often, then the checker and the figures.

use std::fmt;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use tokio::time::Instant;

use crate::backend::Backend;
use crate::checker::{Expectations, Fault, Report, check};
use crate::event::{Event, now_us};
use crate::fleet::{Fleet, Signal};
use crate::run::{Run, lock_names};

/// What a stress run does.
#[derive(Debug, Clone)]
pub struct StressOptions {
    /// The database.
    pub backend: Backend,
    /// Its URL (SQLite: a file URL).
    pub url: String,
    /// Worker processes.
    pub processes: usize,
    /// Lock names, one cron job each in every worker.
    pub locks: usize,
    /// Length of the checked window of ticks.
    pub window: Duration,
    /// Tick length (whole seconds dividing a minute).
    pub tick: Duration,
    /// Job length.
    pub job: Duration,
    /// `lock_at_most_for`.
    pub lease: Duration,
    /// `lock_at_least_for`.
    pub at_least: Duration,
    /// Kill (SIGKILL) a worker in the middle of a job this often, and start a replacement.
    pub kill_every: Option<Duration>,
    /// Pause (SIGSTOP) a worker in the middle of a job this often, for a lease and a tick.
    pub pause_every: Option<Duration>,
    /// Connections per worker.
    pub max_connections: u32,
}

impl StressOptions {
    /// The bounded defaults: 3 processes × 10 locks, 1 s ticks of 600 ms jobs, 8 s window.
    pub fn new(backend: Backend, url: String) -> Self {
        StressOptions {
            backend,
            url,
            processes: 3,
            locks: 10,
            window: Duration::from_secs(8),
            tick: Duration::from_secs(1),
            job: Duration::from_millis(600),
            lease: Duration::from_secs(3),
            at_least: Duration::from_millis(800),
            kill_every: None,
            pause_every: None,
            max_connections: 4,
        }
    }

    /// The options of a `stress` command line (the URL from the test variable when not given).
    ///
    /// # Errors
    /// When there is neither `--url` nor the backend's test variable.
    pub fn from_args(args: StressArgs) -> anyhow::Result<Self> {
        let url = match args.url {
            Some(url) => url,
            None => crate::run::database_url(args.db).with_context(|| {
                format!("--url or {} is needed", args.db.url_var().unwrap_or(""))
            })?,
        };
        Ok(StressOptions {
            processes: args.processes,
            locks: args.locks,
            window: Duration::from_secs(args.seconds),
            tick: Duration::from_secs(args.tick),
            job: Duration::from_millis(args.job_ms),
            lease: Duration::from_millis(args.lease_ms),
            at_least: Duration::from_millis(args.at_least_ms),
            kill_every: args.kill_every.map(Duration::from_secs),
            pause_every: args.pause_every.map(Duration::from_secs),
            max_connections: args.max_connections,
            ..StressOptions::new(args.db, url)
        })
    }
}

/// The defaults the command line shows and uses: those of [`StressOptions::new`].
fn defaults() -> StressOptions {
    StressOptions::new(Backend::Sqlite, String::new())
}

/// The command line of `shedlock-harness stress`.
#[derive(Debug, clap::Args)]
pub struct StressArgs {
    /// The database: sqlite, postgres, mysql, redis or redlock.
    #[arg(long)]
    pub db: Backend,
    /// Its URL; by default the backend's test variable (SHEDLOCK_TEST_PG_URL,
    /// SHEDLOCK_TEST_MYSQL_URL, …); SQLite: a temporary file.
    #[arg(long)]
    pub url: Option<String>,
    /// Worker processes.
    #[arg(long, default_value_t = defaults().processes)]
    pub processes: usize,
    /// Lock names, one cron job each in every worker.
    #[arg(long, default_value_t = defaults().locks)]
    pub locks: usize,
    /// Length of the checked window of ticks, in seconds.
    #[arg(long, default_value_t = defaults().window.as_secs())]
    pub seconds: u64,
    /// Tick length in whole seconds dividing a minute.
    #[arg(long, default_value_t = defaults().tick.as_secs())]
    pub tick: u64,
    /// Job length in milliseconds.
    #[arg(long, default_value_t = millis(defaults().job))]
    pub job_ms: u64,
    /// `lock_at_most_for` in milliseconds.
    #[arg(long, default_value_t = millis(defaults().lease))]
    pub lease_ms: u64,
    /// `lock_at_least_for` in milliseconds.
    #[arg(long, default_value_t = millis(defaults().at_least))]
    pub at_least_ms: u64,
    /// Kill (SIGKILL) a worker in the middle of a job every SECS seconds, and start a
    /// replacement.
    #[arg(long, value_name = "SECS")]
    pub kill_every: Option<u64>,
    /// Pause (SIGSTOP) a worker in the middle of a job every SECS seconds, for a lease and a
    /// tick.
    #[arg(long, value_name = "SECS")]
    pub pause_every: Option<u64>,
    /// Connections per worker.
    #[arg(long, default_value_t = defaults().max_connections)]
    pub max_connections: u32,
}

fn millis(duration: Duration) -> u64 {
    duration.as_millis() as u64
}

impl fmt::Display for StressOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_millis();
        write!(
            f,
            "{} processes × {} locks on {}, tick {} s, job {} ms, lease {} ms, at least {} ms, \
             window {} s, {} connections per process",
            self.processes,
            self.locks,
            self.backend,
            self.tick.as_secs(),
            ms(self.job),
            ms(self.lease),
            ms(self.at_least),
            self.window.as_secs(),
            self.max_connections
        )?;
        match (self.kill_every, self.pause_every) {
            (None, None) => write!(f, ", no faults"),
            (kill, pause) => {
                if let Some(k) = kill {
                    write!(f, ", SIGKILL every {} s", k.as_secs())?;
                }
                if let Some(p) = pause {
                    write!(f, ", SIGSTOP every {} s", p.as_secs())?;
                }
                Ok(())
            }
        }
    }
}

/// Runs a stress test with workers spawned from the harness binary `exe`.
///
/// # Errors
/// When the run could not be carried out (database unreachable, workers failing to start);
/// rule violations are in the returned report instead.
pub async fn run_stress(exe: &Path, options: &StressOptions) -> anyhow::Result<Report> {
    let run = Run::create(options.backend, &options.url).await?;
    let result = drive(exe, options, &run).await;
    run.cleanup().await;
    result
}

async fn drive(exe: &Path, o: &StressOptions, run: &Run) -> anyhow::Result<Report> {
    let locks = lock_names("job", o.locks);
    let worker = |index: usize| {
        let mut w = run.worker(index, &locks);
        w.tick = o.tick;
        w.job = o.job;
        w.lease = o.lease;
        w.at_least = o.at_least;
        w.store.max_connections = o.max_connections;
        w
    };
    let mut fleet = Fleet::new(exe);
    let mut started = Vec::new();
    for index in 0..o.processes {
        started.push(fleet.spawn(&worker(index))?);
    }
    fleet.wait_ready(&started, Duration::from_secs(60)).await?;

    let tick_us = i64::try_from(o.tick.as_micros())?;
    let from_tick = now_us() / tick_us + 2;
    let to_tick = from_tick + i64::try_from(o.window.as_micros())? / tick_us;
    let window_end = to_tick * tick_us;
    // Faults from the second tick of the window until a lease and two ticks before its end,
    // so that every takeover happens inside the run.
    let faults_until = window_end - i64::try_from((o.lease + o.tick * 2).as_micros())?;
    let mut next_kill = o
        .kill_every
        .map(|every| (from_tick + 1) * tick_us + every.as_micros() as i64 / 2);
    let mut next_pause = o
        .pause_every
        .map(|every| (from_tick + 1) * tick_us + every.as_micros() as i64);
    let mut paused: Vec<(usize, Instant)> = Vec::new();
    let mut faults = Vec::new();
    let mut outages = Vec::new();
    let stop_at = window_end + i64::try_from((o.job + o.tick).as_micros())?;
    while now_us() < stop_at {
        fleet.collect_for(Duration::from_millis(50)).await;
        let now = now_us();
        if let Some((worker, _)) = paused
            .first()
            .copied()
            .filter(|(_, until)| *until <= Instant::now())
        {
            fleet.signal(worker, Signal::Cont)?;
            paused.remove(0);
            let paused_at = faults
                .iter()
                .rev()
                .find(|f: &&Fault| f.worker == worker)
                .map_or(now, |f| f.at);
            // A worker frozen inside a transaction (SQLite: holding the single write lock;
            // PostgreSQL and MySQL: the row lock of a fenced write) holds up the others' lock
            // statements until it resumes: ticks during a pause are excused.
            outages.push(paused_at - tick_us..now_us() + tick_us);
        }
        for (next, every, signal) in [
            (&mut next_kill, o.kill_every, Signal::Kill),
            (&mut next_pause, o.pause_every, Signal::Stop),
        ] {
            let (Some(due), Some(every)) = (*next, every) else {
                continue;
            };
            if now < due {
                continue;
            }
            let following = due + i64::try_from(every.as_micros())?;
            *next = (following < faults_until).then_some(following);
            let mut busy = fleet.killed();
            busy.extend(paused.iter().map(|p| p.0));
            let since = fleet.events().len();
            // A worker in the middle of a job: the next `start` line of a healthy worker.
            let victim = fleet
                .wait_for(since, o.tick * 3, "a job to start", |r| match &r.event {
                    Event::Start { .. } if !busy.contains(&r.worker) => Some(r.worker),
                    _ => None,
                })
                .await?;
            fleet.signal(victim, signal)?;
            faults.push(Fault {
                worker: victim,
                signal,
                at: now_us(),
            });
            match signal {
                Signal::Kill => {
                    let replacement = fleet.spawn(&worker(fleet.len()))?;
                    fleet
                        .wait_ready(&[replacement], Duration::from_secs(30))
                        .await?;
                }
                _ => paused.push((victim, Instant::now() + o.lease + o.tick)),
            }
        }
    }
    fleet.stop_all(o.job + Duration::from_secs(15)).await?;
    let journal = run.journal().await?;
    let expect = Expectations {
        at_least_us: i64::try_from(o.at_least.as_micros()).unwrap_or(i64::MAX),
        tick_us,
        ticks: Some(from_tick..to_tick),
        outages,
    };
    if let Ok(path) = std::env::var("HARNESS_DUMP") {
        dump(&path, &fleet, &journal, &faults)?;
    }
    let mut report = check(fleet.events(), &journal, &fleet.killed(), &faults, &expect);
    for (worker, line) in fleet.unparsed() {
        report.violations.push(format!(
            "worker {worker} printed an unparsable line: {line}"
        ));
    }
    Ok(report)
}

/// Writes every event line, fault and journal row to `path`, for a person to read.
fn dump(
    path: &str,
    fleet: &Fleet,
    journal: &[crate::backend::JournalRow],
    faults: &[Fault],
) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
    for r in fleet.events() {
        writeln!(out, "w{} {}", r.worker, r.event)?;
    }
    for f in faults {
        writeln!(out, "fault {f:?}")?;
    }
    for row in journal {
        writeln!(out, "row {row:?}")?;
    }
    Ok(())
}
