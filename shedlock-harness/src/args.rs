//! The command line, parsed by clap: `stress` (run by people, see `docs/RELIABILITY.md`), and
//! `worker` and `zk-candidate` (spawned by the harness and its tests from the options'
//! `to_args`). Every option is `--key value`; an unknown, repeated or invalid one is an error.

use clap::{Parser, Subcommand};

use crate::stress::StressArgs;
use crate::worker::WorkerArgs;
use crate::zookeeper::ZkCandidateArgs;

/// shedlock's reliability harness: separate worker processes contending for the same locks,
/// with faults injected from outside, and a checker that proves what held.
#[derive(Debug, Parser)]
#[command(name = "shedlock-harness")]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// A subcommand and its options.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Runs a stress test and prints its figures (exit status 1 when a rule was broken).
    Stress(StressArgs),
    /// One worker process (spawned by the harness).
    #[command(hide = true)]
    Worker(Box<WorkerArgs>),
    /// One ZooKeeper election candidate (spawned by the harness).
    #[command(hide = true)]
    ZkCandidate(ZkCandidateArgs),
    /// One etcd election candidate (spawned by the harness): the same options, `--root` being
    /// the key prefix.
    #[command(hide = true)]
    EtcdCandidate(ZkCandidateArgs),
    /// The same on the lock provider's leases (spawned by the harness).
    #[command(hide = true)]
    EtcdLockCandidate(ZkCandidateArgs),
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backend::Backend;
    use crate::{StressOptions, WorkerOptions, ZkCandidateOptions};

    fn parse_words(words: impl IntoIterator<Item = String>) -> Result<Command, clap::Error> {
        let program = std::iter::once("shedlock-harness".to_owned());
        Cli::try_parse_from(program.chain(words)).map(|cli| cli.command)
    }

    fn parse(line: &str) -> Result<Command, clap::Error> {
        parse_words(line.split_whitespace().map(str::to_owned))
    }

    fn stress(line: &str) -> StressOptions {
        match parse(&format!("stress --url sqlite:///tmp/x.db {line}")) {
            Ok(Command::Stress(args)) => StressOptions::from_args(args).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn stress_reads_the_documented_command_lines() {
        let o = stress(
            "--db postgres --processes 8 --locks 100 --seconds 60 --tick 2 --job-ms 1000 \
             --lease-ms 5000 --at-least-ms 1500 --kill-every 10 --pause-every 15 \
             --max-connections 2",
        );
        assert_eq!(
            (o.backend, o.processes, o.locks),
            (Backend::Postgres, 8, 100)
        );
        assert_eq!(
            (o.window, o.tick),
            (Duration::from_secs(60), Duration::from_secs(2))
        );
        assert_eq!(o.job, Duration::from_millis(1000));
        assert_eq!(o.lease, Duration::from_millis(5000));
        assert_eq!(o.at_least, Duration::from_millis(1500));
        assert_eq!(o.kill_every, Some(Duration::from_secs(10)));
        assert_eq!(o.pause_every, Some(Duration::from_secs(15)));
        assert_eq!(o.max_connections, 2);
    }

    #[test]
    fn stress_defaults_are_the_options_defaults() {
        let parsed = stress("--db sqlite");
        let defaults = StressOptions::new(Backend::Sqlite, parsed.url.clone());
        assert_eq!(format!("{parsed}"), format!("{defaults}"));
    }

    #[test]
    fn typos_repeats_and_bad_values_are_errors() {
        for line in [
            "stress --db postgres --proceses 8",
            "stress --db postgres --processes 8 --processes 9",
            "stress --db postgres --processes many",
            "stress --db oracle",
            "stress --processes 8",
            "worker --db sqlite",
        ] {
            assert!(parse(line).is_err(), "{line}");
        }
    }

    /// Election timing of 3 s leases, renewed within 2 s, retried every `retry_ms`.
    fn timing(retry_ms: u64) -> shedlock::ElectionConfig {
        shedlock::ElectionConfig {
            lease_duration: Duration::from_millis(3000),
            renew_deadline: Duration::from_millis(2000),
            retry_period: Duration::from_millis(retry_ms),
        }
    }

    #[test]
    fn a_worker_reads_back_what_the_supervisor_wrote() {
        let run = crate::StoreConfig {
            backend: Backend::Postgres,
            url: "postgres://root@127.0.0.1:5432/test".into(),
            lock_table: "shedlock_t".into(),
            journal_table: "journal_t".into(),
            holder: "worker-1".into(),
            max_connections: 3,
            acquire_timeout: Duration::from_millis(1500),
        };
        let mut options = WorkerOptions::new(run, vec!["a".into(), "b".into()]);
        options.keep_alive = true;
        options.connect_retries = 2;
        options.election = Some(timing(500));
        let line = std::iter::once("worker".to_owned()).chain(options.to_args());
        let Command::Worker(args) = parse_words(line).unwrap() else {
            panic!("not a worker");
        };
        let back = WorkerOptions::from_args(*args).unwrap();
        assert_eq!(format!("{back:?}"), format!("{options:?}"));
    }

    #[test]
    fn a_candidate_reads_back_what_the_supervisor_wrote() {
        let options = ZkCandidateOptions {
            url: "127.0.0.1:2181".into(),
            root: "/r".into(),
            election: "e".into(),
            holder: "c1".into(),
            config: timing(400),
            act_every: Duration::from_millis(50),
        };
        let line = std::iter::once("zk-candidate".to_owned()).chain(options.to_args());
        let Command::ZkCandidate(args) = parse_words(line).unwrap() else {
            panic!("not a candidate");
        };
        let back = ZkCandidateOptions::from_args(args);
        assert_eq!(format!("{back:?}"), format!("{options:?}"));
    }
}
