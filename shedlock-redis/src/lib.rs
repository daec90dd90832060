//! Lock providers for [shedlock](https://docs.rs/shedlock) on Redis: cluster locks for
//! scheduled jobs and leader election, on **Redis's clock**, with **fencing tokens** and
//! release hints for fast handover.
//!
//! | provider | servers | acquire | survives |
//! |---|---|---|---|
//! | [`RedisLockProvider`] | one | 1 script, 1 round trip | nothing: the server is the single point of failure |
//! | [`RedLockProvider`] | N independent masters | 1 script on each, in parallel; a majority must grant | the loss of a minority of masters |
//!
//! ```no_run
//! use std::time::Duration;
//! use shedlock_core::{LockConfiguration, LockingTaskExecutor};
//! use shedlock_redis::RedisLockProvider;
//!
//! # async fn run() -> Result<(), shedlock_core::Error> {
//! let provider = RedisLockProvider::connect("redis://127.0.0.1:6379").await?;
//! let executor = LockingTaskExecutor::new(provider.clone());
//! let config = LockConfiguration::new("send_newsletter", Duration::from_secs(300), Duration::ZERO)?;
//! executor.execute(&config, async { /* the job */ }).await?;
//! for lock in provider.list_locks().await? {
//!     println!("{lock}"); // send_newsletter: last held by host:4121:a83e until … (token 1)
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Keys and Redis time
//!
//! A lock is one hash, `<key prefix><name>` (prefix `shedlock:` unless
//! [configured](RedisProviderBuilder::key_prefix)), with fields `holder`, `token`, `locked_at`
//! and `lock_until`, times in milliseconds of the server's `TIME`. Acquire, release and extend
//! are Lua scripts (in `lua/` beside this crate) that read `TIME` and compare and write those
//! fields atomically, so leases
//! begin and end by the server's clock, never an instance's. The hash has no expiry: the
//! lease is over when `lock_until <= TIME`, which is the clock a `PX` expiry would use too.
//! The hash must outlive the lease because its `token` is the counter the next acquisition
//! increments, and its `locked_at` is what
//! [`unless_acquired_within`](shedlock_core::LockConfiguration::unless_acquired_within)
//! compares, after the lease ended too. One hash per lock name stays in Redis, like a row of
//! the SQL providers' table. A key of another type at a lock's name is reported as such
//! (`WRONGTYPE`), naming the key.
//!
//! # Fencing tokens
//!
//! Every acquisition stores `token + 1` in the same script, so on one server a lease's token
//! is strictly greater than every earlier one of its lock name, across restarts of the
//! instances. Release and extend match holder **and** token. Pass the token to the resource
//! you write and have it reject older ones.
//!
//! If the Redis server loses its data (a restart without persistence, a flush, a failover
//! to a replica that had not yet received the last writes), the counters are gone and tokens
//! start again at 1: a resource that keeps the highest token it saw then rejects the new
//! holders' writes until you clear it, which is safe but stops the work. Run Redis with
//! `appendonly yes` if that matters, or use [`RedLockProvider`], whose masters agree on tokens
//! and heal a master that lost its data.
//!
//! # Release hints
//!
//! A release that frees the lock publishes the lock's name on the
//! [release channel](RedisLockProvider::release_channel) (`<key prefix>released`) from the
//! same script. [`LockProvider::release_hints`](shedlock_core::LockProvider::release_hints)
//! subscribes to it, so election candidates retry at once after a leader resigns instead of
//! at their next poll. Messages published while a subscriber reconnects are lost: hints only
//! wake waiters early, polling stays the mechanism.
//!
//! # The client
//!
//! The providers use [redis-rs](https://docs.rs/redis) (`redis` 1.x), the most used and
//! actively maintained Rust client, with its `ConnectionManager`: one multiplexed connection
//! per server that pipelines concurrent commands from every task and reconnects by itself;
//! scripts run by `EVALSHA` and are loaded on `NOSCRIPT`. The same crate offers cluster and
//! sentinel clients should a later provider need them.

mod builder;
mod error;
mod hints;
mod keys;
mod node;
mod proposals;
mod redlock;
mod scripts;
mod single;
mod state;

pub use builder::RedisProviderBuilder;
pub use keys::DEFAULT_KEY_PREFIX;
pub use redlock::RedLockProvider;
pub use single::RedisLockProvider;
pub use state::RedisLockState;
