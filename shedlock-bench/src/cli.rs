//! The command line, parsed by clap: a part to run (default `all`) and its settings, or one of
//! the child processes the benchmarks spawn (hidden subcommands).

use std::time::Duration;

use clap::{Parser, Subcommand, ValueEnum};

use crate::db::Db;
use crate::fleet::Mode;

/// Benchmarks of shedlock's providers and leader election; results and method in BENCHMARKS.md.
/// Databases: SHEDLOCK_TEST_PG_URL and SHEDLOCK_TEST_MYSQL_URL (else the local defaults);
/// SQLite in a temporary file.
#[derive(Debug, Parser)]
#[command(name = "shedlock-bench", args_conflicts_with_subcommands = true)]
pub(crate) struct Cli {
    /// A child process the benchmarks spawn.
    #[command(subcommand)]
    pub(crate) child: Option<Child>,
    /// What to run: `all` is every SQL part; redis, zookeeper and fleet run alone.
    #[arg(value_enum, default_value_t = Part::All)]
    part: Part,
    /// Databases, comma-separated.
    #[arg(
        long = "db",
        value_delimiter = ',',
        default_value = "postgres,mysql,sqlite"
    )]
    databases: Vec<Db>,
    /// Concurrent workers per timed run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,8,32")]
    workers: Vec<usize>,
    /// Only these throughput clients (ours, raw, ours-pool, raw-pool), for investigations.
    #[arg(long, value_delimiter = ',')]
    clients: Option<Vec<String>>,
    /// Only this throughput mode (uncontended or contended); for fleet: lock or leader.
    #[arg(long)]
    mode: Option<String>,
    /// Tokio worker threads (1: a current-thread runtime); default one per core.
    #[arg(long)]
    threads: Option<usize>,
    /// Length of each timed run, in seconds.
    #[arg(long, default_value_t = 0.8)]
    seconds: f64,
    /// Interleaved rounds.
    #[arg(long, default_value_t = 4)]
    reps: usize,
    /// Handovers measured per case.
    #[arg(long, default_value_t = 20)]
    handovers: usize,
    /// Fleet: instance counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "2,5,10")]
    instances: Vec<usize>,
    /// Fleet: job counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "10,100,1000")]
    jobs: Vec<usize>,
    /// Fleet: the measured window, in seconds.
    #[arg(long, default_value_t = 12)]
    window: u64,
}

/// A part of the benchmarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(crate) enum Part {
    /// statements, scaling, throughput and handover.
    All,
    /// Lock pairs per second against raw SQL and pgbench.
    Throughput,
    /// Statements per operation.
    Statements,
    /// Cost per lock as the table grows.
    Scaling,
    /// Leader election handover latency.
    Handover,
    /// Redis and RedLock (SHEDLOCK_TEST_REDIS_URL, SHEDLOCK_TEST_REDLOCK_URLS).
    Redis,
    /// ZooKeeper (SHEDLOCK_TEST_ZK_URL).
    Zookeeper,
    /// Fleet scale: instances × jobs.
    Fleet,
}

/// The child processes, spawned by the benchmarks themselves.
#[derive(Debug, Subcommand)]
pub(crate) enum Child {
    /// A leader election candidate that prints `elected <term>` and waits to be killed.
    #[command(hide = true)]
    Candidate {
        /// The database.
        db: Db,
        /// Its URL.
        url: String,
        /// The election.
        name: String,
        /// Lease duration (ms).
        lease_ms: u64,
        /// Renew deadline (ms).
        renew_ms: u64,
        /// Retry period (ms).
        retry_ms: u64,
    },
    /// A ZooKeeper candidate that leads, prints `leader` and waits to be killed.
    #[command(hide = true)]
    ZkCandidate {
        /// The ensemble's connect string.
        url: String,
        /// The election's root node.
        root: String,
    },
    /// One fleet instance (its URL in an environment variable).
    #[command(hide = true)]
    FleetInstance {
        /// The database.
        db: Db,
        /// Registered jobs.
        jobs: usize,
        /// Pool size.
        connections: usize,
        /// How the jobs are kept to one instance.
        mode: Mode,
    },
}

/// What to run and for how long.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) part: Part,
    pub(crate) databases: Vec<Db>,
    pub(crate) workers: Vec<usize>,
    /// Only these throughput clients (`ours`, `raw`, `ours-pool`, `raw-pool`), for investigations.
    pub(crate) clients: Option<Vec<String>>,
    /// Only this throughput mode (`uncontended` or `contended`); fleet: `lock` or `leader`.
    pub(crate) mode: Option<String>,
    /// Tokio worker threads (1: current-thread runtime); default one per core.
    pub(crate) threads: Option<usize>,
    pub(crate) reps: usize,
    pub(crate) warmup: Duration,
    pub(crate) run: Duration,
    pub(crate) handovers: usize,
    pub(crate) scaling_iterations: usize,
    /// Fleet: instance counts, job counts and the window in seconds.
    pub(crate) instances: Vec<usize>,
    pub(crate) jobs: Vec<usize>,
    pub(crate) window: u64,
}

impl Settings {
    /// The settings of a command line without a child subcommand.
    ///
    /// # Errors
    /// When `--seconds` is not a positive duration.
    pub(crate) fn from_cli(cli: Cli) -> anyhow::Result<Self> {
        Ok(Settings {
            part: cli.part,
            databases: cli.databases,
            workers: cli.workers,
            clients: cli.clients,
            mode: cli.mode,
            threads: cli.threads,
            reps: cli.reps,
            warmup: Duration::from_millis(250),
            run: Duration::try_from_secs_f64(cli.seconds)?,
            handovers: cli.handovers,
            scaling_iterations: 1000,
            instances: cli.instances,
            jobs: cli.jobs,
            window: cli.window,
        })
    }

    /// Whether `part` runs: `all` is every SQL part but the fleet, which runs alone.
    pub(crate) fn runs(&self, part: Part) -> bool {
        (self.part == Part::All && part != Part::Fleet) || self.part == part
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(line: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(
            ["shedlock-bench"]
                .into_iter()
                .chain(line.split_whitespace()),
        )
    }

    fn settings(line: &str) -> Settings {
        Settings::from_cli(parse(line).unwrap()).unwrap()
    }

    #[test]
    fn reads_the_documented_command_lines() {
        let s = settings("");
        assert_eq!(s.part, Part::All);
        assert_eq!(s.databases, Db::ALL);
        assert_eq!(
            (s.workers.as_slice(), s.reps, s.handovers),
            (&[1, 8, 32][..], 4, 20)
        );
        assert_eq!(s.run, Duration::from_millis(800));
        assert_eq!(
            (s.instances, s.jobs, s.window),
            (vec![2, 5, 10], vec![10, 100, 1000], 12)
        );

        let s = settings(
            "throughput --db postgres --workers 1 --mode uncontended --clients ours,raw --reps 1 \
             --seconds 4 --threads 1",
        );
        assert_eq!(
            (s.part, s.databases.as_slice()),
            (Part::Throughput, &[Db::Postgres][..])
        );
        assert_eq!(s.clients, Some(vec!["ours".to_owned(), "raw".to_owned()]));
        assert_eq!(
            (s.mode.as_deref(), s.threads),
            (Some("uncontended"), Some(1))
        );
        assert_eq!(s.run, Duration::from_secs(4));
        assert!(s.runs(Part::Throughput) && !s.runs(Part::Scaling));

        let s =
            settings("--db mysql,sqlite fleet --mode leader --instances 2 --jobs 10 --window 3");
        assert_eq!(
            (s.part, s.databases),
            (Part::Fleet, vec![Db::Mysql, Db::Sqlite])
        );
        assert!(settings("all").runs(Part::Handover) && !settings("all").runs(Part::Fleet));
    }

    #[test]
    fn reads_the_children_the_benchmarks_spawn() {
        let cli = parse("candidate postgres postgres://h/db election 3000 2000 500").unwrap();
        assert!(matches!(
            cli.child,
            Some(Child::Candidate {
                db: Db::Postgres,
                lease_ms: 3000,
                retry_ms: 500,
                ..
            })
        ));
        let cli = parse("zk-candidate 127.0.0.1:2181 /root").unwrap();
        assert!(matches!(cli.child, Some(Child::ZkCandidate { .. })));
        let cli = parse("fleet-instance sqlite 100 4 leader").unwrap();
        assert!(matches!(
            cli.child,
            Some(Child::FleetInstance {
                db: Db::Sqlite,
                jobs: 100,
                connections: 4,
                mode: Mode::Leader
            })
        ));
    }

    #[test]
    fn typos_and_bad_values_are_errors() {
        for line in [
            "throughput --reps",
            "--db oracle",
            "thruput",
            "--workers 1,x",
            "--seconds -1",
        ] {
            let parsed = parse(line)
                .map_err(|e| e.to_string())
                .and_then(|cli| Settings::from_cli(cli).map_err(|e| e.to_string()));
            assert!(parsed.is_err(), "{line}");
        }
    }
}
