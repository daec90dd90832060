//! What the tests of every shedlock crate share, so that no crate copies another's helpers or
//! reaches into another's `tests/` (not published; a dev-dependency, and a dependency of the
//! unpublished harness and benchmarks).
//!
//! - [`env`](mod@env): the URLs of the servers this workspace tests against (each read with
//!   the conformance kit's `env_url`: skipped locally, failed under `CI=true`).
//! - [`names`]: ZooKeeper roots no other test uses (the kit has lock, table and key-prefix
//!   names).
//! - [`RedisServer`]: a private `redis-server` on a free port, to kill and restart.
//! - [`Ensemble`]: the servers of the test ZooKeeper ensemble (`.ci/zookeeper.sh`), stopped
//!   and started again.
//! - [`EtcdCluster`]: the members of the test etcd cluster (`.ci/etcd.sh`), stopped and
//!   started again.
//! - [`stores`]: this workspace's stores opened for the facade's and tools' tests.
//! - [`throughput`]: pairs per second of `N` looping workers over a measured window, for the
//!   benchmarks and the stores' figures tests.
//!
//! What a store of anyone's needs (the suites, `ServerHarness`, `CutProxy`, unique names, the
//! skip rule, run-history and rerun scenarios) is the published kit, `shedlock-conformance`.

mod ci_script;
pub mod env;
mod etcd;
pub mod names;
mod redis_server;
pub mod stores;
pub mod throughput;
mod zookeeper;

pub use env::{etcd_url, mysql_url, pg_url, redis_url, redlock_urls, webdriver_url, zk_url};
pub use etcd::{EtcdCluster, StoppedMember};
pub use names::unique_zk_root;
pub use redis_server::{RedisServer, redis_installed};
pub use zookeeper::{Ensemble, ServerMode, StoppedServer};
