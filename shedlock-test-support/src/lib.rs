//! What the tests of every shedlock crate share, so that no crate copies another's helpers or
//! reaches into another's `tests/` (not published; a dev-dependency, and a dependency of the
//! unpublished harness and benchmarks).
//!
//! - [`env`](mod@env): the test servers' URLs from the environment. Without one a test prints a
//!   visible `skipped: …` line and returns; under `CI=true` it fails instead.
//! - [`names`]: lock, table, key-prefix and node names no other test (thread or process) uses.
//! - [`CutProxy`]: a TCP proxy on 127.0.0.1 whose connections can be held, cut, or made to lose
//!   one answer, for the network failures one instance sees while the others keep working.
//! - [`ServerHarness`]: the conformance suite's harness for a store on a real server.
//! - [`RedisServer`]: a private `redis-server` on a free port, to kill and restart.
//! - [`runs`]: run-record scenarios beyond the conformance cases (a stalled holder's late end).
//! - [`reruns`]: "a rerun never overlaps a live run", the two live cases every store runs.
//! - [`Ensemble`]: the servers of the test ZooKeeper ensemble (`.ci/zookeeper.sh`), stopped
//!   and started again.
//! - [`EtcdCluster`]: the members of the test etcd cluster (`.ci/etcd.sh`), stopped and
//!   started again.
//! - [`throughput`]: pairs per second of `N` looping workers over a measured window, for the
//!   benchmarks and the stores' figures tests.

mod ci_script;
pub mod env;
mod etcd;
mod harness;
pub mod names;
mod proxy;
mod redis_server;
pub mod reruns;
pub mod runs;
pub mod stores;
pub mod throughput;
mod zookeeper;

pub use env::{
    env_url, etcd_url, mysql_url, on_ci, pg_url, redis_url, redlock_urls, skip, webdriver_url,
    zk_url,
};
pub use etcd::{EtcdCluster, StoppedMember};
pub use harness::ServerHarness;
pub use names::{unique_key_prefix, unique_lock_name, unique_table, unique_zk_root};
pub use proxy::{CutProxy, ProxyMode, upstream_of, url_at};
pub use redis_server::RedisServer;
pub use zookeeper::{Ensemble, ServerMode, StoppedServer};
