//! The stores whose journal is a Redis list (Redis, RedLock and etcd) behind the harness's
//! [`Store`](crate::Store): the lock provider, and the run's journal appended behind a fencing
//! guard.
//!
//! - **One server**: the journal lives in the same Redis as the locks, and a Lua script appends
//!   a row only if the lease `(holder, token)` is live there (`lock_until > TIME`), in the same
//!   atomic step: the Redis form of `verify_lease` + `INSERT` in one transaction.
//! - **RedLock**: the journal lives on a separate Redis server (the protected resource, which
//!   must not die with the masters). A row is appended only if, when the write is checked, the
//!   lease is live on a majority of the masters, and the resource then accepts it only if its
//!   token is above every token it accepted for that lock (Kleppmann's fencing rule). The row's
//!   end time is taken before the check, so a write the check let through cannot overlap a
//!   later lease in the journal, and a late write is caught by the token rule.
//! - **etcd**: the journal lives on the Redis test server, as for RedLock: a row is appended
//!   only if etcd holds the lease `(holder, token)` when the write is checked, and the
//!   resource accepts it only if its token is above every token it accepted for that lock.

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use anyhow::Context as _;
use redis::Script;
use redis::aio::ConnectionManager;
use shedlock::{
    LockInspector, LockProvider, etcd::EtcdLockProvider, redis::RedLockProvider,
    redis::RedisLockProvider,
};

use crate::backend::{Backend, JournalRow, StoreConfig};
use crate::event::WriteOutcome;

/// `KEYS`: lock hash, journal list. `ARGV`: holder, token, row. 1 if appended, 0 if the lease
/// is not live.
static APPEND_IF_LIVE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', KEYS[1], 'holder', 'token', 'lock_until')
if s[1] ~= ARGV[1] or s[2] ~= ARGV[2] or (tonumber(s[3]) or 0) <= now then
  return 0
end
redis.call('RPUSH', KEYS[2], ARGV[3])
return 1
",
    )
});

/// `KEYS`: journal list, highest-token hash. `ARGV`: lock, token, row. 1 if appended, 0 if a
/// token at least as high was accepted before.
static APPEND_IF_NEWER: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r"
local highest = tonumber(redis.call('HGET', KEYS[2], ARGV[1])) or 0
if tonumber(ARGV[2]) <= highest then
  return 0
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('RPUSH', KEYS[1], ARGV[3])
return 1
",
    )
});

/// The locks of a Redis run.
#[derive(Debug, Clone)]
enum Locks {
    /// Boxed: a single-server provider is much larger than the others.
    Single(Box<RedisLockProvider>),
    RedLock(RedLockProvider),
    Etcd(EtcdLockProvider),
}

/// A Redis or RedLock store of one worker (or the supervisor).
#[derive(Debug, Clone)]
pub struct RedisStore {
    locks: Locks,
    /// The server holding the journal.
    journal: ConnectionManager,
}

/// For RedLock, [`StoreConfig::url`] holds the journal's server first, then the masters,
/// comma-separated.
pub fn redlock_url(journal: &str, masters: &str) -> String {
    format!("{journal},{masters}")
}

impl RedisStore {
    /// Connects the provider (key prefix `<lock table>:`) and the journal's server.
    ///
    /// # Errors
    /// When a server cannot be reached or refuses.
    pub(crate) async fn connect(config: &StoreConfig) -> anyhow::Result<RedisStore> {
        let builder = RedisLockProvider::builder()
            .key_prefix(format!("{}:", config.lock_table))
            .holder(&config.holder);
        let (locks, journal_url) = match config.backend {
            Backend::Redis => {
                let provider = builder
                    .timeout(config.acquire_timeout.min(Duration::from_secs(1)))
                    .connect(&config.url)
                    .await?;
                (Locks::Single(Box::new(provider)), config.url.as_str())
            }
            Backend::RedLock => {
                let (journal, masters) = config
                    .url
                    .split_once(',')
                    .context("RedLock needs the journal's server, then the masters")?;
                let provider = builder
                    // The per-master timeout of the algorithm: much shorter than the leases.
                    .timeout(config.acquire_timeout.min(Duration::from_millis(500)))
                    .redlock()
                    .connect(masters.split(','))
                    .await?;
                (Locks::RedLock(provider), journal)
            }
            Backend::Etcd => {
                let (journal, endpoints) = config
                    .url
                    .split_once(',')
                    .context("etcd needs the journal's Redis server, then the endpoints")?;
                let provider = EtcdLockProvider::builder(endpoints)
                    .prefix(format!("{}/", config.lock_table))
                    .holder(&config.holder)
                    .request_timeout(config.acquire_timeout.min(Duration::from_secs(1)))
                    .connect()
                    .await?;
                (Locks::Etcd(provider), journal)
            }
            other => anyhow::bail!("{other} is not a Redis backend"),
        };
        let client = redis::Client::open(journal_url).context("the journal's Redis URL")?;
        let journal = ConnectionManager::new(client)
            .await
            .context("connect to the journal's Redis")?;
        Ok(RedisStore { locks, journal })
    }

    /// The provider, shared.
    pub(crate) fn provider(&self) -> Arc<dyn LockProvider> {
        match &self.locks {
            Locks::Single(p) => Arc::new((**p).clone()),
            Locks::RedLock(p) => Arc::new(p.clone()),
            Locks::Etcd(p) => Arc::new(p.clone()),
        }
    }

    /// Empties the journal (a list) and its highest-token hash.
    pub(crate) async fn drop_journal(&self, journal: &str) -> anyhow::Result<()> {
        let mut connection = self.journal.clone();
        redis::cmd("DEL")
            .arg(journal)
            .arg(format!("{journal}:highest"))
            .query_async::<()>(&mut connection)
            .await?;
        Ok(())
    }

    /// Appends the row behind the guard described in the module docs.
    pub(crate) async fn fenced_write(&self, journal: &str, row: &JournalRow) -> WriteOutcome {
        let line = format!(
            "{} {} {} {} {} {}",
            row.lock, row.token, row.holder, row.tick, row.start, row.end
        );
        let mut connection = self.journal.clone();
        let appended: redis::RedisResult<i64> = match &self.locks {
            Locks::Single(provider) => {
                APPEND_IF_LIVE
                    .key(provider.key(&row.lock))
                    .key(journal)
                    .arg(provider.holder())
                    .arg(row.token)
                    .arg(line)
                    .invoke_async(&mut connection)
                    .await
            }
            Locks::RedLock(provider) => {
                // The majority's view: the lease a majority holds, live by its earliest end
                // less the drift allowance.
                let live = match provider.lock_record(&row.lock).await {
                    Ok(record) => record.is_some_and(|r| {
                        r.held
                            && r.holder == provider.holder()
                            && i64::try_from(r.fencing_token) == Ok(row.token)
                    }),
                    Err(error) => return WriteOutcome::Failed(format!("read the lease: {error}")),
                };
                if !live {
                    return WriteOutcome::Rejected;
                }
                append_if_newer(&mut connection, journal, row, line).await
            }
            Locks::Etcd(provider) => {
                let live = match provider.lock_record(&row.lock).await {
                    Ok(Some(record)) => {
                        record.held
                            && record.holder == provider.holder()
                            && i64::try_from(record.fencing_token) == Ok(row.token)
                    }
                    Ok(None) => false,
                    Err(error) => return WriteOutcome::Failed(format!("read the lock: {error}")),
                };
                if !live {
                    return WriteOutcome::Rejected;
                }
                append_if_newer(&mut connection, journal, row, line).await
            }
        };
        match appended {
            Ok(1) => WriteOutcome::Accepted,
            Ok(_) => WriteOutcome::Rejected,
            Err(error) => WriteOutcome::Failed(format!("append: {error}")),
        }
    }

    /// Every journal row, in append order.
    pub(crate) async fn journal(&self, journal: &str) -> anyhow::Result<Vec<JournalRow>> {
        let mut connection = self.journal.clone();
        let lines: Vec<String> = redis::cmd("LRANGE")
            .arg(journal)
            .arg(0)
            .arg(-1)
            .query_async(&mut connection)
            .await?;
        lines
            .iter()
            .enumerate()
            .map(|(index, line)| {
                let fields: Vec<&str> = line.split(' ').collect();
                let [lock, token, holder, tick, start, end] = fields[..] else {
                    anyhow::bail!("journal row {index} is malformed: {line:?}");
                };
                Ok(JournalRow {
                    id: i64::try_from(index)? + 1,
                    lock: lock.to_owned(),
                    token: token.parse()?,
                    holder: holder.to_owned(),
                    tick: tick.parse()?,
                    start: start.parse()?,
                    end: end.parse()?,
                })
            })
            .collect()
    }
}

/// Appends `line` to `journal` if `row`'s token is above every token accepted for its lock.
async fn append_if_newer(
    connection: &mut ConnectionManager,
    journal: &str,
    row: &JournalRow,
    line: String,
) -> redis::RedisResult<i64> {
    APPEND_IF_NEWER
        .key(journal)
        .key(format!("{journal}:highest"))
        .arg(&row.lock)
        .arg(row.token)
        .arg(line)
        .invoke_async(connection)
        .await
}
