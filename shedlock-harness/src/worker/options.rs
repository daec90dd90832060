//! A worker's command line: what the supervisor passes and the worker reads back.

use std::time::Duration;

use shedlock::ElectionConfig;

use crate::args::Args;
use crate::store::{Backend, DEFAULT_ACQUIRE_TIMEOUT, StoreConfig};

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
    /// On a missing, unknown or invalid option.
    pub fn from_args(mut args: Args) -> anyhow::Result<Self> {
        let store = StoreConfig {
            backend: args.required::<Backend>("db")?,
            url: args.required("url")?,
            lock_table: args.required("lock-table")?,
            journal_table: args.required("journal-table")?,
            holder: args.required("holder")?,
            max_connections: args.get("max-connections", 4)?,
            acquire_timeout: args.millis("acquire-timeout-ms", DEFAULT_ACQUIRE_TIMEOUT)?,
        };
        let locks: String = args.required("locks")?;
        let locks: Vec<String> = locks.split(',').map(str::to_owned).collect();
        anyhow::ensure!(
            locks
                .iter()
                .all(|l| !l.is_empty() && !l.contains(char::is_whitespace)),
            "lock names must be non-empty and without whitespace: {locks:?}"
        );
        let defaults = WorkerOptions::new(store.clone(), Vec::new());
        let election_lease = args.optional::<u64>("election-lease-ms")?;
        let leader_every = args.optional::<u64>("leader-every-ms")?;
        let options = WorkerOptions {
            tick: args.millis("tick-ms", defaults.tick)?,
            job: args.millis("job-ms", defaults.job)?,
            lease: args.millis("lease-ms", defaults.lease)?,
            at_least: args.millis("at-least-ms", defaults.at_least)?,
            keep_alive: args.get("keep-alive", false)?,
            connect_retries: args.get("connect-retries", 0)?,
            election: match election_lease {
                Some(lease) => Some(ElectionConfig {
                    lease_duration: Duration::from_millis(lease),
                    renew_deadline: args.millis("election-renew-ms", Duration::ZERO)?,
                    retry_period: args.millis("election-retry-ms", Duration::ZERO)?,
                }),
                None => None,
            },
            leader_work: match leader_every {
                Some(every) => Some(LeaderWork {
                    every: Duration::from_millis(every),
                    timing: ElectionConfig {
                        lease_duration: args.millis("leader-lease-ms", Duration::ZERO)?,
                        renew_deadline: args.millis("leader-renew-ms", Duration::ZERO)?,
                        retry_period: args.millis("leader-retry-ms", Duration::ZERO)?,
                    },
                }),
                None => None,
            },
            store,
            locks,
        };
        args.finish()?;
        let tick = options.tick.as_secs();
        anyhow::ensure!(
            options.tick.subsec_nanos() == 0 && tick > 0 && 60 % tick == 0,
            "--tick-ms must be whole seconds dividing a minute"
        );
        Ok(options)
    }
}
