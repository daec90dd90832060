//! Lock providers for [shedlock](https://docs.rs/shedlock) on Redis: cluster locks for
//! scheduled jobs and leader election, on **Redis's clock**, with **fencing tokens** and
//! release hints for fast handover.
//!
//! | provider | servers | acquire | a batch of claims | survives |
//! |---|---|---|---|---|
//! | [`RedisLockProvider`] | one | 1 script, 1 round trip | 1 script per 500 locks | nothing: the server is the single point of failure |
//! | [`RedisLockProvider`] through Sentinel (`redis+sentinel://`) | a master and its replicas | the same, on the master | the same | the loss of the master, after the sentinels promote a replica; a grant the replica had not received is lost ([`wait_for_replicas`](RedisLockProviderBuilder::wait_for_replicas) prevents it) |
//! | [`RedisLockProvider`] on a Redis Cluster (`redis+cluster://`) | masters sharing the slots, with replicas | the same, on the master of the lock's slot | 1 script per hash slot (and 500 locks), all at once | the loss of a master, after the cluster promotes its replica; as through Sentinel, a grant the replica had not received is lost unless `wait_for_replicas` |
//! | [`RedLockProvider`] | N independent masters | 1 script on each, in parallel; a majority must grant | 1 script per 500 locks on each, and 1 more on each master that must take grants back | the loss of a minority of masters |
//!
//! ```no_run
//! use std::time::Duration;
//! use shedlock_core::{LockConfiguration, LockInspector, LockQuery};
//! use shedlock_runtime::LockingTaskExecutor;
//! use shedlock_redis::RedisLockProvider;
//!
//! # async fn run() -> Result<(), shedlock_core::Error> {
//! let provider = RedisLockProvider::connect("redis://127.0.0.1:6379").await?;
//! let executor = LockingTaskExecutor::new(provider.clone());
//! let config = LockConfiguration::new("send_newsletter", Duration::from_secs(300), Duration::ZERO)?;
//! executor.execute(&config, async { /* the job */ }).await?;
//! for lock in provider.list_locks(&LockQuery::all()).await? {
//!     println!("{lock}"); // send_newsletter: last held by host:4121:a83e until … (token 1)
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # Keys and Redis time
//!
//! A lock is one hash, `<key prefix><name>` (`<key prefix>{<name>}` on a [Redis
//! Cluster](#redis-cluster); prefix `shedlock:` unless
//! [configured](RedisLockProviderBuilder::key_prefix)), with fields `holder`, `token`, `locked_at`
//! and `lock_until`, times in milliseconds of the server's `TIME`, and `last_tick` (milliseconds
//! since the epoch) once a [tick](shedlock_core::LockConfiguration::for_tick) was granted: the
//! acquire script grants a tick only if it follows `last_tick` by the tick's spacing and lies
//! within its ahead bound of `TIME`, and sets it with the grant; a hash without it (written by an
//! earlier version) takes any tick. Acquire, release and extend are Lua scripts (in `lua/` beside
//! this crate) that read `TIME` and compare and write those fields atomically, so leases begin and
//! end by the server's clock, never an instance's. The hash has no expiry: the lease is over when
//! `lock_until <= TIME`, which is the clock a `PX` expiry would use too. The hash outlives the
//! lease because its `token` is the floor of the next one, its `locked_at` is what
//! [`unless_acquired_within`](shedlock_core::LockConfiguration::unless_acquired_within) compares,
//! after the lease ended too, and its `last_tick` refuses the tick of a holder that died. A hash
//! deleted (or flushed, or evicted) forgets its last tick with it. One hash per lock name stays in
//! Redis, like a row of the SQL providers' table. A key of another type at a lock's name is
//! reported as such (`WRONGTYPE`), naming the key. A lock hash whose fields are not what the
//! scripts wrote (edited by hand, a number that is not a whole number below 2^53) is an
//! [`Error::Store`] naming the key and the field (`corrupt lock hash …`), with nothing written:
//! never a grant, never a token starting over. Delete the key to reset such a lock.
//!
//! [`Error::Store`]: shedlock_core::Error::Store
//!
//! # Fencing tokens
//!
//! An acquisition's token is `max(previous token + 1, TIME in microseconds since the epoch)`,
//! computed in the acquire script. So a lease's token is strictly greater than every earlier
//! one of its lock name, and stays so when the hash is gone: deleted by hand (the usual way
//! to reset a lock), a `FLUSHALL`, a restart without persistence, an eviction. The next token
//! is then above every token granted before, as long as the server's clock has not gone back
//! since. Release and extend match holder **and** token. Pass the token to the resource you
//! write and have it reject older ones.
//!
//! **One server is one point of failure, and a replica failover loses locks.** Under Sentinel
//! or a managed Redis with replicas, a grant is answered before it reaches a replica; if the
//! primary fails then, the promoted replica never saw it and grants the lock again **while
//! the first holder still runs**. No lease can prevent that;
//! [`wait_for_replicas`](RedisLockProviderBuilder::wait_for_replicas) does: a grant is
//! answered only once a replica acknowledged it (`WAIT`), else released and answered with an
//! error, so a promoted replica holds every grant a holder was given (the test
//! `tests/sentinel.rs` shows both: a grant no replica received granted again after the
//! failover, and with `wait_for_replicas` refused before it). `WAIT` does not make the
//! replica's copy durable: a replica that restarts without persistence, or a failover to a
//! replica that had not acknowledged (with more replicas than asked for), can still lose it.
//! With the token rule above, the
//! second token is above the first as long as the new primary's clock is not behind the old
//! one's, so a resource that keeps the highest token it saw refuses the first holder's writes
//! once the second holder has written; writes of the first holder before that are accepted,
//! so both may act for a while. With a new primary whose clock is behind, the second token
//! can be the lower one, and the resource then refuses the new holder and keeps accepting
//! the stale one. When two holders must never act at once, use [`RedLockProvider`] over
//! independent masters (no replication) or a SQL store; on one server, prefer `appendonly
//! yes` (`appendfsync always` to survive a crash of the server itself).
//!
//! # Server settings
//!
//! - `maxmemory-policy`: the `allkeys-*` policies evict keys without an expiry too, so a lock
//!   hash can vanish during its lease and the lock be granted again while its holder runs;
//!   the providers log a warning at connect when they can read the setting. Use `noeviction`
//!   (the default) or a `volatile-*` policy, which never evict the lock hashes.
//! - An expiry set on a lock key by hand (`EXPIRE`) ends the lock state with it, as a `DEL`
//!   would: tokens stay above the earlier ones, but a lease running then is granted again.
//! - Release hints use `PUBLISH`, not keyspace notifications: `notify-keyspace-events` plays
//!   no part.
//! - Scripts: Redis 7 replicates a script's effects, so reading `TIME` is allowed, and it does
//!   not roll a script back: every script checks what it reads before its first write.

//! # Batched claims
//!
//! [`acquire_many`](shedlock_core::LockProvider::acquire_many), which the scheduler calls with
//! the locks of all the ticks due at one instant, runs the acquire script once for up to 500
//! locks (names in order, so two instances cut a batch alike): the script is the single
//! acquisition's, looping over its keys, and decides each lock as
//! [`acquire`](shedlock_core::LockProvider::acquire) would, on one `TIME` read for the call.
//! A larger batch takes one call per 500 locks: Redis serves nothing else while a script runs,
//! and a call of 500 free locks runs about 2 ms on the server (10–20 µs for one lock; the test
//! `batches.rs` prints it). A lock whose hash cannot be read (corrupt, `WRONGTYPE`) is
//! answered with its own error and the batch's other locks are answered; a call that fails
//! answers each of its locks with an error naming it. Scripts are atomic, so batches never wait
//! on one another whatever their order.
//!
//! On RedLock a round is one call per master for all the locks still undecided; each lock is
//! granted when a majority granted it within its validity, as a single acquisition is, and the
//! grants of the locks no majority granted are taken back (tick included) in one call per
//! master that holds any. Locks whose votes split, or whose token proposal was behind, go to
//! further rounds together, with the single acquisition's retries and pauses.
//!
//! On a Redis Cluster a script's keys must share one hash slot, and each lock's key has its
//! own hash tag (its name): a batch is grouped by slot, each group cut into chunks of 500 as
//! above, and every call sent at once (each goes to its slot's master).
//!
//! # Run records
//!
//! Both providers keep the records of every run the scheduler starts under their locks
//! ([`RunLog`](shedlock_core::RunLog), returned by
//! [`LockProvider::run_log`](shedlock_core::LockProvider::run_log)), in the same Redis beside
//! the lock hashes, under keys of their own: `runs:<key prefix>` unless
//! [configured](RedisLockProviderBuilder::runs_key_prefix), so `runs:shedlock:records:<lock>` (a
//! hash of the lock's records, JSON), `runs:shedlock:started:<lock>` (a sorted set of them by
//! start) and `runs:shedlock:index` (a sorted set of every lock's runs by start).
//!
//! - **Writes**: starting, ending and renewing a run's heartbeat is one script each, one round
//!   trip, on Redis's `TIME`; the first end recorded stays (a run marked interrupted is not
//!   turned into a success by its stalled holder's late end).
//! - **Bounded by construction**: the scripts that start and end a run delete, in the same
//!   round trip, the lock's records older than
//!   [`run_retention`](RedisLockProviderBuilder::run_retention) (14 days) or beyond its newest
//!   [`runs_per_lock`](RedisLockProviderBuilder::runs_per_lock) (1000), so no lock ever holds
//!   more, whatever the order in which locks run; and up to 64 of the oldest runs of any lock
//!   past the retention, so a lock that never runs again loses its old records to the writes
//!   of the others. Every key also expires a retention after its last write. Nothing else is
//!   kept: no key per instance or holder. A run still live (running under a heartbeat that has
//!   not passed) is kept past both bounds until it ends or its heartbeat passes: trimming
//!   history never stops a job that still runs.
//! - **Reads** are one script that reads only the page asked for: one lock's runs from its
//!   sorted set, every lock's from the index, newest first, from
//!   [`before`](shedlock_core::RunQuery::before) (exclusive), cut by the limit in Redis. A
//!   query without a limit (or above 500) is read by pages of 500, one script each, so no
//!   script replies a whole history while Redis serves nothing else.
//! - **Heartbeats**: a run started with a [lease](shedlock_core::RunStart::lease) records
//!   `alive_until` = `TIME` + lease, which
//!   [`run_alive`](shedlock_core::RunLog::run_alive) moves on while the record still runs and
//!   its heartbeat has not passed (Redis's clock, as the locks use); an end clears it.
//!
//! On RedLock every master keeps a copy, written by the same scripts on its own clock, and a
//! write counts when a majority accepted it. A read asks every master for the page (16 more
//! records) and keeps what a majority holds: a run listed on a majority, its end the one a
//! majority holds (else it reads as running), its times the median of the masters'; a
//! heartbeat renewal counts when a majority renewed it. A master whose answer was full may
//! hold older runs it did not send, so the page keeps only what is newer than the last run of
//! every full answer and is read again with twice as many when that leaves it short: pages
//! stay full and follow each other without gaps when a minority holds runs of its own.
//!
//! The scripts name the keys of other locks they sweep, as a single server or RedLock's
//! independent masters allow. A Redis Cluster's scripts cannot (their keys must share one
//! slot): there a lock's keys carry its name as hash tag (`runs:shedlock:records:{<lock>}`,
//! `…started:{<lock>}`) and it has an index of its own (`…index:{<lock>}`) instead of the
//! index of every lock; a write trims its own lock as above but sweeps no other, and a read
//! lists no record past the retention (unless it still runs under a live heartbeat), which
//! goes at its lock's next write or with its keys. A read of every lock's runs reads the page
//! of each lock with runs (found by `SCAN` on every master) and merges them: one script per
//! such lock and page.
//!
//! ```no_run
//! use shedlock_core::{LockProvider, RunQuery};
//! # async fn run(provider: shedlock_redis::RedisLockProvider) -> Result<(), shedlock_core::Error> {
//! for run in provider.run_log().unwrap().runs(&RunQuery::lock("nightly").limit(10)).await? {
//!     println!("{run}"); // report #1 (token 1795586506951802) on web-1: succeeded in 1.2s
//! }
//! # Ok(())
//! # }
//! ```
//!
//! # The fleet's board
//!
//! Both providers are a [`Board`](shedlock_core::Board), the small keyed store a
//! [`Fleet`](shedlock_core::Fleet) keeps its instances' job listings and its operators'
//! switches (pause, run now) in. It lives under keys of its own, `board:<key prefix>` unless
//! [configured](RedisLockProviderBuilder::board_key_prefix): three keys sharing the hash tag
//! `{board}`, so that a Redis Cluster keeps them in one slot:
//! `board:shedlock:{board}:entries` (a hash: key → `<version>:<written_at>:<expires_at>:<value>`,
//! times in ms of Redis's `TIME`), `…{board}:index` (a sorted set of the keys, all scored 0,
//! read in bytewise order by `ZRANGEBYLEX`) and `…{board}:version` (the counter every write
//! `INCR`s, so versions grow across a removal and a new write of a key).
//!
//! A write or a removal is one script that reads the key's entry, decides its condition
//! (absent, the version read, or always) and writes, atomically, on Redis's clock: an entry
//! past its expiry counts as absent and is deleted on the way. A read of a prefix is one
//! script too: the index's range of the prefix, the entries by `HMGET`, the expired ones it
//! met deleted. It costs the entries under the prefix, not the whole board.
//!
//! On RedLock the board lives on one master, the
//! [board master](RedLockProvider::board_master) (the one whose address sorts first), not on a
//! majority: independent masters cannot decide one compare-and-set between them (two writers
//! with the same version can each win a master, and the loser's write stays where it won),
//! and their counters give no version they share. While the board master is down, board
//! operations fail and the locks go on on the others; a restart of it without persistence
//! loses the switches (instances publish their jobs again at their next beat).

//! # Release hints
//!
//! A release that frees the lock publishes the lock's name on the
//! [release channel](RedisLockProvider::release_channel) (`<key prefix>released`) from the
//! same script. [`LockProvider::release_hints`](shedlock_core::LockProvider::release_hints)
//! subscribes to it, so election candidates retry at once after a leader resigns instead of
//! at their next poll. Messages published while a subscriber reconnects are lost: hints only
//! wake waiters early, polling stays the mechanism. On a Redis Cluster a message published on
//! any master reaches every node's subscribers: the subscription is on one of the nodes the
//! URL names, the next one each time it is made again.
//!
//! # Redis Sentinel
//!
//! `redis+sentinel://[[user]:password@]host:port,host:port,…/master_name[/db]` (or
//! `rediss+sentinel://` with TLS to the sentinels and the master) given to
//! [`connect`](RedisLockProviderBuilder::connect) opens a [`RedisLockProvider`] on the
//! master the sentinels name (redis-rs's lookup: the first sentinel that answers names a
//! master not flagged down, and its `ROLE` confirms it). The URL's credentials are the
//! master's; sentinels with a password of their own take `?sentinel_password=…`. Keys,
//! scripts and wire are those of one server.
//!
//! After a failover: the first call that finds the old master gone (connection refused or
//! lost, no answer within the timeout) or demoted (`READONLY`) fails, the calls after it fail
//! at once, and the sentinels are asked every 100 ms until they name a master that answers
//! as one; the provider connects to it and goes on. In the failover test (sentinels with
//! `down-after-milliseconds 1000`) the replica was promoted about 2.2 s after the master was
//! killed and the fleets' next per-second tick ran on it. Release hints subscribe on the new
//! master when their connection breaks.
//!
//! A master cut off from the sentinels and the other replicas but not from some instances
//! keeps granting to them until it learns it was replaced; `min-replicas-to-write` on the
//! servers bounds that, as the Sentinel documentation explains.
//!
//! # Redis Cluster
//!
//! `redis+cluster://[[user]:password@]host:port,host:port,…` (any nodes of the cluster;
//! `rediss+cluster://` with TLS) given to [`connect`](RedisLockProviderBuilder::connect)
//! opens a [`RedisLockProvider`] on the cluster through redis-rs's cluster client, which
//! sends each script to the master of its key's slot and follows `MOVED` redirections and
//! failovers by itself. There a lock's hash is `<key prefix>{<name>}`: the name is the hash
//! tag, so every key of a lock shares its slot (one server and RedLock keep `<key
//! prefix><name>`, so their existing locks stay where they are). Acquire, release and extend
//! are the same scripts, one round trip to the slot's master; a batch goes by slot (see
//! above); [`list_locks`](shedlock_core::LockInspector::list_locks) scans every master; a
//! [`wait_for_replicas`](RedisLockProviderBuilder::wait_for_replicas) `WAIT` is pipelined to
//! the slot's master with the script; run records are kept per lock in its slot (see [Run
//! records](#run-records)); release hints too ([Release hints](#release-hints)). The failover
//! test `tests/cluster.rs` kills the
//! master of the locks' slots under two fleets: its replica was promoted about 2.4 s later
//! (`cluster-node-timeout 1000`) and the fleets' next tick ran on it; a grant the replica had
//! not received was granted again, and with `wait_for_replicas` refused before the kill.
//! [`cluster_shards`](RedisLockProvider::cluster_shards) lists the masters, their replicas
//! and slots (`shedlock doctor` prints them).
//!
//! # TLS
//!
//! `rediss://` URLs connect over TLS (the `tls` feature, on by default: redis-rs's rustls
//! support with ring). The servers' certificates are checked against the system's roots, or
//! those named by the `SSL_CERT_FILE` / `SSL_CERT_DIR` environment variables, or those given
//! to [`tls_root_certificates`](RedisLockProviderBuilder::tls_root_certificates) (a private
//! CA). `rediss://host:port/#insecure` (no check) is refused. `rediss+sentinel://` reaches
//! the sentinels and the master over TLS, `rediss+cluster://` every node of the cluster, with
//! the same roots (`tests/tls.rs` runs both against servers answering TLS only or, for the
//! sentinel's master, with a password).
//!
//! # The client
//!
//! The providers use [redis-rs](https://docs.rs/redis) (`redis` 1.x), the most used and
//! actively maintained Rust client, with its `ConnectionManager`: one multiplexed connection
//! per server that pipelines concurrent commands from every task and reconnects by itself;
//! scripts run by `EVALSHA` and are loaded on `NOSCRIPT`. Through Sentinel it uses redis-rs's
//! Sentinel client to find the master.

mod batch;
mod board;
mod builder;
mod cluster;
mod error;
mod hints;
mod inspect;
mod names;
mod node;
mod proposals;
mod provider;
mod redlock;
mod replicas;
mod runs;
mod scripts;
mod sentinel;
mod time;

pub use builder::{Majority, RedLockProviderBuilder, RedisLockProviderBuilder, SingleServer};
pub use inspect::{ClusterShard, Replication};
pub use names::DEFAULT_KEY_PREFIX;
pub use provider::RedisLockProvider;
pub use redlock::RedLockProvider;
