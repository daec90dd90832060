//! `doctor` on Redis and etcd: the server, each RedLock master or the etcd cluster reachable
//! and its clock; then the locks, as the provider reads them.

use std::time::{Duration, SystemTime};

use shedlock_redis::{RedLockProvider, RedisLockProvider};

use super::{clock, count_locks, millis};
use crate::connect;
use crate::failure::{Exit, Failure};
use crate::target::Target;

/// One server: reachable (checked when the provider connected), its clock, its locks.
pub(crate) async fn redis(provider: &RedisLockProvider, target: &Target) -> Result<Exit, Failure> {
    out!("ok       Redis {} is reachable", target.shown);
    clock(provider, "Redis").await?;
    count_locks(provider).await?;
    Ok(Exit::Ok)
}

/// etcd: the cluster reachable (checked when the provider connected), its clock, its locks.
pub(crate) async fn etcd(
    provider: &shedlock_etcd::EtcdLockProvider,
    target: &Target,
) -> Result<Exit, Failure> {
    out!("ok       etcd cluster {} is reachable", target.shown);
    clock(provider, "etcd").await?;
    count_locks(provider).await?;
    Ok(Exit::Ok)
}

/// RedLock: each master on its own (reachable, clock), how far the masters' clocks are apart,
/// and the locks as a majority agrees on them. A master down is a problem even while a
/// majority answers: one more failure stops every lock.
pub(crate) async fn redlock(
    args: &crate::cli::DatabaseArgs,
    target: &Target,
) -> Result<Exit, Failure> {
    let urls = target.redis_urls();
    let quorum = urls.len() / 2 + 1;
    let mut clocks: Vec<SystemTime> = Vec::new();
    for url in &urls {
        let shown = crate::secrets::Masked::any(url).shown;
        match connect::redis_provider(args, url).await {
            Ok(master) => {
                out!("ok       master {shown} is reachable");
                clocks.push(clock(&master, "master").await?);
            }
            Err(error) => {
                out!("problem  master {shown} cannot be reached: {error}");
                out!(
                    "fix      start it or fix its address: with {} of {} masters down the \
                     locks stop",
                    urls.len() - quorum + 1,
                    urls.len()
                );
            }
        }
    }
    if let (Some(first), Some(last)) = (clocks.iter().min(), clocks.iter().max()) {
        let spread = last.duration_since(*first).unwrap_or(Duration::ZERO);
        out!(
            "info     the masters' clocks are {} apart (each read at a slightly different \
             moment); leases run on each master's own clock",
            millis(spread)
        );
    }
    if clocks.len() < quorum {
        out!(
            "problem  {} of {} masters answer; RedLock needs {quorum}",
            clocks.len(),
            urls.len()
        );
        return Ok(Exit::Problems);
    }
    let provider: RedLockProvider = connect::redlock_provider(args, target).await?;
    out!(
        "ok       {} of {} masters answer (RedLock needs {quorum})",
        clocks.len(),
        urls.len()
    );
    count_locks(&provider).await?;
    Ok(if clocks.len() == urls.len() {
        Exit::Ok
    } else {
        Exit::Problems
    })
}
