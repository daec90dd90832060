//! A worker's command line: what the supervisor passes and the worker reads back.

use std::time::Duration;

use shedlock::ElectionConfig;

use crate::backend::{Backend, StoreConfig};
use crate::store::DEFAULT_ACQUIRE_TIMEOUT;

/// Work only the leader does, as often as `every`.
#[derive(Debug, Clone, Copy)]
pub struct LeaderWork {
    /// How often the leader works (a fixed rate).
    pub every: Duration,
    /// The election's timing (scheduler mode; election mode uses `WorkerOptions::election`).
    pub timing: ElectionConfig,
}

/// Everything a worker needs, passed on its command line.
#[derive(Debug, Clone)]
pub struct WorkerOptions {
    /// Database, tables, holder, pool size.
    pub store: StoreConfig,
    /// The lock names, one cron job each (in election mode: the first is the election).
    pub locks: Vec<String>,
    /// Cron period in whole seconds (a divisor of 60): jobs fire at `*/tick` seconds.
    pub tick: Duration,
    /// How long each job body works.
    pub job: Duration,
    /// `lock_at_most_for`.
    pub lease: Duration,
    /// `lock_at_least_for`.
    pub at_least: Duration,
    /// Whether jobs extend their lease while they run.
    pub keep_alive: bool,
    /// The scheduler's heartbeat lease (`SchedulerConfig::run_lease`; zero: off).
    pub run_lease: Duration,
    /// Whether an interrupted tick is run again (`OnInterrupted::Rerun`).
    pub rerun: bool,
    /// Leader election instead of scheduled jobs, with this timing.
    pub election: Option<ElectionConfig>,
    /// Leader work: in scheduler mode a leader-only job (election `leader`) with this period
    /// and election timing; in election mode, work with this period while the candidate leads.
    pub leader_work: Option<LeaderWork>,
    /// Connection attempts after the first, with exponential backoff, before giving up.
    pub connect_retries: u32,
}

impl WorkerOptions {
    /// Defaults for `store`: 1 s ticks, 600 ms jobs, 3 s leases, 800 ms minimum hold.
    pub fn new(store: StoreConfig, locks: Vec<String>) -> Self {
        WorkerOptions {
            store,
            locks,
            tick: Duration::from_secs(1),
            job: Duration::from_millis(600),
            lease: Duration::from_secs(3),
            at_least: Duration::from_millis(800),
            keep_alive: false,
            run_lease: shedlock::SchedulerConfig::default().run_lease,
            rerun: false,
            election: None,
            leader_work: None,
            connect_retries: 0,
        }
    }

    /// The command line that [`from_args`](Self::from_args) reads back (after `worker`).
    pub fn to_args(&self) -> Vec<String> {
        let ms = |d: Duration| d.as_millis().to_string();
        let s = &self.store;
        let mut args = vec![
            ("db", s.backend.to_string()),
            ("url", s.url.clone()),
            ("lock-table", s.lock_table.clone()),
            ("journal-table", s.journal_table.clone()),
            ("holder", s.holder.clone()),
            ("max-connections", s.max_connections.to_string()),
            ("acquire-timeout-ms", ms(s.acquire_timeout)),
            ("locks", self.locks.join(",")),
            ("tick-ms", ms(self.tick)),
            ("job-ms", ms(self.job)),
            ("lease-ms", ms(self.lease)),
            ("at-least-ms", ms(self.at_least)),
            ("keep-alive", self.keep_alive.to_string()),
            ("run-lease-ms", ms(self.run_lease)),
            ("rerun", self.rerun.to_string()),
            ("connect-retries", self.connect_retries.to_string()),
        ];
        if let Some(e) = &self.election {
            args.push(("election-lease-ms", ms(e.lease_duration)));
            args.push(("election-renew-ms", ms(e.renew_deadline)));
            args.push(("election-retry-ms", ms(e.retry_period)));
        }
        if let Some(work) = &self.leader_work {
            args.push(("leader-every-ms", ms(work.every)));
            args.push(("leader-lease-ms", ms(work.timing.lease_duration)));
            args.push(("leader-renew-ms", ms(work.timing.renew_deadline)));
            args.push(("leader-retry-ms", ms(work.timing.retry_period)));
        }
        args.into_iter()
            .flat_map(|(k, v)| [format!("--{k}"), v])
            .collect()
    }

    /// Reads the options [`to_args`](Self::to_args) wrote.
    ///
    /// # Errors
    /// On invalid lock names, or a tick that is not whole seconds dividing a minute.
    pub fn from_args(args: WorkerArgs) -> anyhow::Result<Self> {
        let millis =
            |value: Option<u64>, default: Duration| value.map_or(default, Duration::from_millis);
        let store = StoreConfig {
            backend: args.db,
            url: args.url,
            lock_table: args.lock_table,
            journal_table: args.journal_table,
            holder: args.holder,
            max_connections: args.max_connections,
            acquire_timeout: millis(args.acquire_timeout_ms, DEFAULT_ACQUIRE_TIMEOUT),
        };
        let locks: Vec<String> = args.locks.split(',').map(str::to_owned).collect();
        anyhow::ensure!(
            locks
                .iter()
                .all(|l| !l.is_empty() && !l.contains(char::is_whitespace)),
            "lock names must be non-empty and without whitespace: {locks:?}"
        );
        let defaults = WorkerOptions::new(store.clone(), Vec::new());
        let options = WorkerOptions {
            tick: millis(args.tick_ms, defaults.tick),
            job: millis(args.job_ms, defaults.job),
            lease: millis(args.lease_ms, defaults.lease),
            at_least: millis(args.at_least_ms, defaults.at_least),
            keep_alive: args.keep_alive,
            run_lease: millis(args.run_lease_ms, defaults.run_lease),
            rerun: args.rerun,
            connect_retries: args.connect_retries,
            election: args.election_lease_ms.map(|lease| ElectionConfig {
                lease_duration: Duration::from_millis(lease),
                renew_deadline: millis(args.election_renew_ms, Duration::ZERO),
                retry_period: millis(args.election_retry_ms, Duration::ZERO),
            }),
            leader_work: args.leader_every_ms.map(|every| LeaderWork {
                every: Duration::from_millis(every),
                timing: ElectionConfig {
                    lease_duration: millis(args.leader_lease_ms, Duration::ZERO),
                    renew_deadline: millis(args.leader_renew_ms, Duration::ZERO),
                    retry_period: millis(args.leader_retry_ms, Duration::ZERO),
                },
            }),
            store,
            locks,
        };
        let tick = options.tick.as_secs();
        anyhow::ensure!(
            options.tick.subsec_nanos() == 0 && tick > 0 && 60 % tick == 0,
            "--tick-ms must be whole seconds dividing a minute"
        );
        Ok(options)
    }
}

/// The command line of `shedlock-harness worker`: what [`WorkerOptions::to_args`] writes
/// (durations in milliseconds; a missing one takes [`WorkerOptions::new`]'s default).
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    /// The database kind.
    #[arg(long)]
    db: Backend,
    /// Its URL.
    #[arg(long)]
    url: String,
    /// The lock table of the run.
    #[arg(long)]
    lock_table: String,
    /// The journal table of the run.
    #[arg(long)]
    journal_table: String,
    /// This worker's holder name.
    #[arg(long)]
    holder: String,
    /// Pool size.
    #[arg(long, default_value_t = 4)]
    max_connections: u32,
    /// How long a statement waits for a connection.
    #[arg(long)]
    acquire_timeout_ms: Option<u64>,
    /// Lock names, comma-separated (election mode: the first is the election).
    #[arg(long)]
    locks: String,
    /// Cron period (whole seconds dividing a minute).
    #[arg(long)]
    tick_ms: Option<u64>,
    /// How long each job body works.
    #[arg(long)]
    job_ms: Option<u64>,
    /// `lock_at_most_for`.
    #[arg(long)]
    lease_ms: Option<u64>,
    /// `lock_at_least_for`.
    #[arg(long)]
    at_least_ms: Option<u64>,
    /// Whether jobs extend their lease while they run.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    keep_alive: bool,
    /// The scheduler's heartbeat lease (0: off).
    #[arg(long)]
    run_lease_ms: Option<u64>,
    /// Whether an interrupted tick is run again.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    rerun: bool,
    /// Connection attempts after the first.
    #[arg(long, default_value_t = 0)]
    connect_retries: u32,
    /// Election mode, with this lease.
    #[arg(long)]
    election_lease_ms: Option<u64>,
    /// The election's renew deadline.
    #[arg(long)]
    election_renew_ms: Option<u64>,
    /// The election's retry period.
    #[arg(long)]
    election_retry_ms: Option<u64>,
    /// Leader work this often.
    #[arg(long)]
    leader_every_ms: Option<u64>,
    /// The leader work's election lease.
    #[arg(long)]
    leader_lease_ms: Option<u64>,
    /// The leader work's renew deadline.
    #[arg(long)]
    leader_renew_ms: Option<u64>,
    /// The leader work's retry period.
    #[arg(long)]
    leader_retry_ms: Option<u64>,
}
