//! Opening the stores other than SQL from the command line: the providers on the target, with
//! its key prefix or root, timeout and credentials, and what to say when that fails.

use shedlock_etcd::EtcdLockProvider;
use shedlock_redis::{RedLockProvider, RedisLockProvider};
use shedlock_zookeeper::ZkLockProvider;

use crate::cli::DatabaseArgs;
use crate::failure::{Exit, Failure};
use crate::target::{StoreKind, Target};

/// The store, for messages: `Redis`, `RedLock`, `ZooKeeper`, `a SQL database`.
pub(crate) fn describe(kind: StoreKind) -> &'static str {
    match kind {
        StoreKind::Sql(_) => "a SQL database",
        StoreKind::Redis => "Redis",
        StoreKind::RedLock => "RedLock",
        StoreKind::ZooKeeper => "ZooKeeper",
        StoreKind::Etcd => "etcd",
    }
}

/// A store that cannot be reached (exit 1), in its own words.
fn unreachable(target: &Target, error: &shedlock_core::Error) -> Failure {
    Failure::new(
        Exit::Error,
        format!(
            "cannot reach {} at {}: {error}",
            describe(target.kind),
            target.shown
        ),
    )
}

/// The single-server provider on `url`, with the key prefix and timeout of the command line.
/// Its releases publish the usual release hint, which wakes the lock's waiters at once.
pub(crate) async fn redis_provider(
    args: &DatabaseArgs,
    url: &str,
) -> Result<RedisLockProvider, shedlock_core::Error> {
    let mut builder = RedisLockProvider::builder().timeout(args.connect_timeout);
    if let Some(prefix) = &args.key_prefix {
        builder = builder.key_prefix(prefix);
    }
    builder.connect(url).await
}

/// The RedLock provider on the target's masters.
pub(crate) async fn redlock_provider(
    args: &DatabaseArgs,
    target: &Target,
) -> Result<RedLockProvider, Failure> {
    let mut builder = RedLockProvider::builder().timeout(args.connect_timeout);
    if let Some(prefix) = &args.key_prefix {
        builder = builder.key_prefix(prefix);
    }
    builder
        .connect(target.redis_urls())
        .await
        .map_err(|e| usage_or_unreachable(target, &e))
}

/// An invalid setting (a key prefix, a root) is a usage error; anything else means the store
/// cannot be reached.
pub(crate) fn usage_or_unreachable(target: &Target, error: &shedlock_core::Error) -> Failure {
    match error {
        shedlock_core::Error::InvalidConfig { .. } => {
            Failure::new(Exit::Usage, format!("{}: {error}", target.shown))
        }
        _ => unreachable(target, error),
    }
}

pub(crate) async fn zookeeper_provider(
    args: &DatabaseArgs,
    target: &Target,
) -> Result<ZkLockProvider, Failure> {
    let address = target.zookeeper()?;
    let mut builder =
        ZkLockProvider::builder(address.connect_string).request_timeout(args.connect_timeout);
    if let Some(root) = &args.root {
        builder = builder.root(root);
    }
    if let Some((user, password)) = address.credentials {
        builder = builder.digest_auth(user, password);
    }
    builder
        .connect()
        .await
        .map_err(|e| usage_or_unreachable(target, &e))
}

/// The etcd provider on the target's endpoints, with its credentials and key prefix.
pub(crate) async fn etcd_provider(
    args: &DatabaseArgs,
    target: &Target,
) -> Result<EtcdLockProvider, Failure> {
    let address = target.etcd()?;
    let mut builder =
        EtcdLockProvider::builder(address.connect_string).request_timeout(args.connect_timeout);
    if let Some(prefix) = &args.key_prefix {
        builder = builder.prefix(prefix);
    }
    if let Some((user, password)) = address.credentials {
        builder = builder.credentials(user, password);
    }
    builder
        .connect()
        .await
        .map_err(|e| usage_or_unreachable(target, &e))
}
