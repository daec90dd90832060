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
//! - [`TcpProxy`]: a proxy on 127.0.0.1 whose connections can be cut, for one instance.
//! - [`run_candidate`] and [`Ensemble`]: ZooKeeper election candidates (`zk-candidate`) that
//!   do leader work at a fixed cadence, and the test ensemble's servers, stopped and started.
//!
//! The binary: `shedlock-harness stress --db postgres --processes 8 --locks 100 --seconds 60`
//! (see `docs/RELIABILITY.md`), and `shedlock-harness worker …` as spawned by the fleet.

mod args;
mod checker;
mod event;
mod fleet;
mod proxy;
mod redis_store;
mod run;
mod store;
mod stress;
mod worker;
mod zookeeper;

pub use args::Args;
pub use checker::{Expectations, Fault, Report, Takeover, check};
pub use event::{Counters, Event, WriteOutcome, now_us, unix_us};
pub use fleet::{Fleet, Received, Signal};
pub use proxy::{ProxyMode, TcpProxy, upstream_of, url_at};
pub use redis_store::{RedisStore, redlock_url};
pub use run::{Run, database_url, lock_names};
pub use store::{Backend, DEFAULT_ACQUIRE_TIMEOUT, JournalRow, Store, StoreConfig};
pub use stress::{StressOptions, run_stress};
pub use worker::{LeaderWork, WorkerOptions, emit, run_worker};
pub use zookeeper::{Ensemble, ServerMode, StoppedServer, ZkCandidateOptions, run_candidate};
