//! The reliability harness of shedlock: separate OS processes contending for the same locks on
//! SQLite, PostgreSQL, MariaDB, Redis and RedLock, with faults injected from outside (SIGKILL, SIGSTOP, database
//! restarts, cut connections), and a checker that proves what held.
//!
//! - `worker`: one process = one service instance: a scheduler with a locked cron job per
//!   lock name (or a leader-election candidate). Each execution is journaled in a table of the
//!   run, inside the job's own transaction behind the provider's fencing guard
//!   (`verify_lease`), and reported as a line on stdout ([`Event`]).
//! - [`Fleet`]: spawns workers, collects their lines, waits for a line, sends signals.
//! - [`check`]: per lock, executions never overlap, tokens strictly increase, no write with a
//!   superseded token was accepted, every tick ran exactly once unless a fault excuses it, and
//!   the counts add up. Its own tests break each rule once.
//! - [`run_stress`]: the stress run behind `shedlock-harness stress`, with its figures.
//! - [`run_candidate`]: ZooKeeper election candidates (`zk-candidate`) that do leader work at a
//!   fixed cadence.
//!
//! What every crate's tests share (server URLs, the cut-proxy, private `redis-server`s, the
//! ZooKeeper ensemble's servers) is in `shedlock-test-support`.
//!
//! The binary: `shedlock-harness stress --db postgres --processes 8 --locks 100 --seconds 60`
//! (see `docs/RELIABILITY.md`), and `shedlock-harness worker …` as spawned by the fleet.

mod args;
mod backend;
mod checker;
mod etcd;
mod event;
mod fleet;
mod journal_on_redis;
mod run;
mod store;
mod stress;
mod worker;
mod zookeeper;

pub use args::{Cli, Command};
pub use backend::{Backend, JournalRow, StoreConfig};
pub use checker::{Expectations, Fault, Report, Takeover, check};
pub use etcd::run_etcd_candidate;
pub use event::{Counters, Event, WriteOutcome, now_us, unix_us};
pub use fleet::{Fleet, Received, Signal};
pub use journal_on_redis::{RedisStore, redlock_url};
pub use run::{Run, database_url, lock_names};
pub use store::{DEFAULT_ACQUIRE_TIMEOUT, Store};
pub use stress::{StressArgs, StressOptions, run_stress};
pub use worker::{LeaderWork, WorkerArgs, WorkerOptions, emit, run_worker};
pub use zookeeper::{ZkCandidateArgs, ZkCandidateOptions, run_candidate};
