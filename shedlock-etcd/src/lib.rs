//! [shedlock](https://docs.rs/shedlock) on [etcd](https://etcd.io) (v3 API, 3.4 or later): a
//! lock provider whose leases are etcd's own, with the cluster's revision as fencing token,
//! and leader election on leases and revisions.
//!
//! - [`EtcdLockProvider`]: the [`LockProvider`](shedlock_core::LockProvider) contract (the
//!   provider conformance suite passes unchanged): a lock is held while its key exists on an
//!   etcd lease, created in a transaction that requires it absent. Tokens are revisions.
//!   Also a [`LockInspector`](shedlock_core::LockInspector) and a
//!   [`RunLog`](shedlock_core::RunLog), and release hints from a watch.
//! - [`EtcdElector`]: etcd's election recipe behind shedlock's
//!   [`Elector`](shedlock_core::Elector) seam: the candidate with the oldest key leads.
//!   Switching an election from a SQL table to etcd is one line:
//!   `LeaderElection::builder("batch", provider.elector())`.
//!
//! ```no_run
//! use std::time::Duration;
//! use shedlock_core::LockConfiguration;
//! use shedlock_runtime::{LeaderElection, LockingTaskExecutor};
//! use shedlock_etcd::EtcdLockProvider;
//!
//! # async fn run() -> Result<(), shedlock_core::Error> {
//! let provider =
//!     EtcdLockProvider::connect("http://etcd1:2379,http://etcd2:2379,http://etcd3:2379").await?;
//!
//! let executor = LockingTaskExecutor::new(provider.clone());
//! let config = LockConfiguration::new("send_newsletter", Duration::from_secs(300), Duration::ZERO)?;
//! executor.execute(&config, async { /* the job */ }).await?;
//!
//! let election = LeaderElection::builder("batch", provider.elector())
//!     .on_elected(|term| println!("master mode, term {term}"))
//!     .on_revoked(|| println!("slave mode"))
//!     .start()?;
//! # Ok(())
//! # }
//! ```
//!
//! # etcd's time
//!
//! etcd has no clock to read; it has leases, whose time-to-live its leader counts down. Who
//! may hold a lock is decided by etcd on those leases alone: a lease key exists or it does
//! not. Leases are whole seconds, so a lease lasts `lock_at_most_for` rounded up to a whole
//! second, and at least etcd's minimum TTL (about 2 s with the default heartbeat and election
//! timeout); when etcd's own leader changes, the new leader gives every lease its full TTL
//! again. A lock whose holder dies is therefore held at least as long as asked, sometimes
//! longer, never shorter.
//!
//! The times a [`LockLease`](shedlock_core::LockLease) and a lock's record report
//! (`locked_at`, `lock_until`) are read from the clock of the instance that wrote them. Two
//! decisions are taken on them, both about a lock that is already free, never about a running
//! lease: [`unless_acquired_within`](shedlock_core::LockConfiguration::unless_acquired_within)
//! compares the record's `locked_at` with the acquiring instance's clock; and a
//! `lock_at_least_for` that a release left running ends when the record's `lock_until` has
//! passed: the releasing instance deletes the minimum-hold key then, and if it cannot (paused,
//! gone), the next instance to acquire does. One more is taken on the acquiring instance's
//! clock alone: a claim for a tick
//! ([`for_tick`](shedlock_core::LockConfiguration::for_tick)) is refused while the tick lies
//! further ahead of that clock than the tick allows (the job's period, when the scheduler
//! claims). Keep the fleet's clocks in sync (NTP), as for any deployment.
//!
//! # Keys
//!
//! Under the prefix (default `shedlock/`): `locks/<name>` (the record: last holder, token and
//! times, JSON, kept after release), `held/<name>` (on the lease; exists while held),
//! `least/<name>` (on a lease of `lock_at_least_for`; exists until the minimum hold has
//! passed), `ticks/<name>` (the last tick granted, in decimal milliseconds, on no lease;
//! absent until a tick is claimed, as for every lock written before ticks),
//! `elections/<election>/<lease>` (candidates), and the run records' keys: `run/`,
//! `run-time/`, `run-alive/` and `run-leases/` (see [Run records](#run-records)). To reset a
//! lock by hand, delete its keys (`etcdctl del --prefix shedlock/held/<name>` and the like):
//! its holder, if it still runs, is then refused at release and extension, and the next token
//! is above every earlier one.
//!
//! # Batches
//!
//! The ticks an instance has due at one instant are claimed in one call
//! ([`LockProvider::acquire_many`](shedlock_core::LockProvider::acquire_many)), in the round
//! trips of one acquire: one read transaction of the records and last ticks the locks need
//! (per 64 locks), the etcd leases of the locks still free (one per lock, all at once), then
//! one transaction per 100 locks, holding one nested transaction per lock (etcd 3.3 and later)
//! with exactly that lock's compares and writes. Each lock is granted or refused on its own,
//! as a single acquire would be; a lock another instance took after the read refuses only
//! itself. All the locks one transaction grants have its revision as fencing token. Counted by
//! the cluster (`tests/batch.rs`): 100 tick claims are 2 reads, 100 lease grants and 1
//! transaction (2 reads when refused), where 100 acquires are 200 transactions and 100
//! grants. The leases are not shared: a release or an extension revokes its lock's lease (and
//! so do an operator's release and the end of a minimum hold), which would end every lock
//! on a shared one.
//!
//! Those transactions carry up to 128 operations (etcd's default `--max-txn-ops`): a cluster
//! run with a lower limit refuses them, and each lock of such a batch fails with etcd's
//! "too many operations in txn request".
//!
//! # Run records
//!
//! [`RunLog`](shedlock_core::RunLog) keeps a record per run (JSON, readable with etcdctl):
//!
//! - `run/<lock>/<id>`: the record. The id is the run's token and attempt, each subtracted
//!   from its largest value, so a lock's records sort newest first in etcd's key order and a
//!   page is one range with a limit: etcd reads what the page returns, not the lock's history.
//!   Within a lock the order is the tokens': the order etcd granted the leases the runs
//!   started under, which is the order they started in; it is the start times' order too
//!   while the instances' clocks agree. A `before` cursor pages a lock from its token and
//!   attempt, so pages neither skip nor repeat.
//! - `run-time/<start>-<id>-<lock>`: an empty key per record, every lock's runs by start
//!   (microseconds, newest first): a read across locks ranges over it with its `before`,
//!   `since` and limit, keys only, then reads the records it names. Reads go in pages of 50
//!   records, well within gRPC's 4 MiB message limit whatever the records hold.
//! - `run-leases/<retention>/<bucket>`: retention without a lease per record. Time is cut in
//!   buckets of 1/64 of `run_retention` (whole seconds, at least one; 5¼ hours for the
//!   default 14 days), and every record written in a bucket, by any instance keeping records
//!   as long, lives on that bucket's one lease. Every write's transaction also finds the
//!   buckets whose start is a retention old, and the writer revokes their leases, which
//!   deletes their records. So a record is kept at most `run_retention` (a write later) and at
//!   least `run_retention` less a bucket, on every lock, also one that never runs again; and
//!   the records hold about 65 leases, whatever their number. If no instance writes, each
//!   lease still runs out a bucket past the retention.
//! - A lock's records are counted in the transaction that writes one; past `runs_per_lock` +
//!   8 the oldest go down to `runs_per_lock`, on whichever instance wrote: a lock never keeps
//!   more than `runs_per_lock` + [`RUN_TRIM_SLACK`](shedlock_core::RUN_TRIM_SLACK), whatever
//!   the other locks do.
//! - `run-alive/<lock>/<id>`: a running run's heartbeat, on an etcd lease of the run's
//!   heartbeat lease (whole seconds, rounded up), renewed by
//!   [`run_alive`](shedlock_core::RunLog::run_alive) and deleted with its lease when the run
//!   ends. etcd has no clock, so its lease is the heartbeat: a run reads as alive
//!   ([`RunRecord::alive_until`](shedlock_core::RunRecord::alive_until) after the read time)
//!   while the key exists, and as passed once etcd ended the lease; the deadline written in
//!   the record (the runner's clock) is what the runner itself goes by, and a runner that
//!   finds it passed ends the lease at once, so no instance sees the run go on after its
//!   runner stopped. A renewal reaches etcd after the runner started counting its own
//!   deadline, and etcd's lease is at least as long: the key outlives the run.
//! - A run still alive is never deleted under its runner (which would stop it): trimming
//!   skips it (the next oldest goes), and each heartbeat moves its record to the current
//!   bucket's lease. It is kept past both bounds until it ends or its heartbeat passes.
//!
//! Costs in round trips: a start 1 transaction (2 with a heartbeat: its lease's grant); an
//! end 2 (read, transaction); a heartbeat 3 (read, lease renewal, transaction); every 9th run
//! of a lock adds 2 (the lock's oldest, a deletion); a bucket once per bucket and instance 1
//! to 3 (read, or grant and publish), and its end one revocation. Records written by versions
//! before these keys (`runs/<lock>/…`, a lease each) are no longer read; their leases end them
//! within their retention. Leases live: one per held lock, one per running run's heartbeat,
//! and about 65 for every run record kept, never one per record.
//!
//! # Fleet board
//!
//! [`EtcdLockProvider`] is the fleet's [`Board`](shedlock_core::Board) (what
//! [`Fleet`](shedlock_core::Fleet) publishes and switches): one key per entry,
//! `<prefix>board/<key>`, the value after a header line holding when it was written and its
//! time to live. Versions are the key's `mod_revision`; a write or removal under a condition
//! is one transaction comparing `create_revision` (absent) or `mod_revision` (two when the
//! entry read has a time to live: a read and a compare-and-set); a read of a prefix is one
//! range request per 200 entries, all at one revision. An entry with a time to live is put on
//! an etcd lease of that length rounded up to whole seconds (one more round trip), so etcd
//! deletes it; as etcd has no clock to read, `written_at` is the writing instance's clock
//! (milliseconds) and `expires_at` that plus the time to live (milliseconds, rounded up), and
//! a reader takes an entry past `expires_at` on its own clock as gone, before its lease (which
//! runs at least that long) deletes it: as for the locks, keep the fleet's clocks in sync.
//!
//! # Fencing tokens
//!
//! A lease's token is the revision of the transaction that granted it. etcd's revision counts
//! every write to the cluster, never goes back (not after a delete, a compaction or a
//! restart), and is agreed by the cluster's quorum: so tokens strictly increase per lock, and
//! leader terms (the revision of the leader's key) are on the same scale. Pass the token to
//! the resource you write and have it reject older ones.
//!
//! # Auth and TLS
//!
//! [`credentials`](EtcdLockProviderBuilder::credentials) sets etcd's user and password; the
//! token etcd hands out is renewed when it expires. Grant the user read and write on the
//! prefix only (`etcdctl role grant-permission <role> readwrite --prefix shedlock/`). With the
//! `tls` feature, [`tls`](EtcdLockProviderBuilder::tls) passes tonic's TLS settings through.
//! Passwords, tokens and TLS keys never appear in any error, log or `Debug` output.
//!
//! # Errors
//!
//! etcd failures are [`Error::Store`](shedlock_core::Error::Store) naming the operation and
//! lock. Every request is bounded by the request timeout (default 5 s): without a quorum,
//! operations fail instead of waiting. A member that does not answer is left for the next
//! endpoint; reads and lease requests are sent again there at once, a transaction only when
//! it cannot have reached the first member. Invalid endpoints, prefixes, holders and
//! credentials are [`Error::InvalidConfig`](shedlock_core::Error::InvalidConfig) naming the
//! field.
//!
//! # The client
//!
//! The crate speaks etcd's gRPC API itself, on [tonic](https://docs.rs/tonic) 0.14 and
//! [prost](https://docs.rs/prost), with the few messages it sends declared by hand: the
//! maintained etcd client crates generate their code from etcd's `.proto` files in a build
//! script that needs `protoc` installed, which a `cargo build` on a fresh machine does not
//! have.

mod batch;
mod board;
mod builder;
mod claim;
mod client;
mod election;
mod error;
#[cfg(test)]
mod figures;
mod hints;
mod inspect;
mod names;
mod provider;
mod record;
mod runs;
mod wire;

pub use builder::{EtcdElectorBuilder, EtcdLockProviderBuilder};
pub use election::EtcdElector;
pub use names::DEFAULT_PREFIX;
pub use provider::EtcdLockProvider;
