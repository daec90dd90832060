//! The stores other than SQL: one Redis server, RedLock masters and ZooKeeper, opened from the
//! target and run through their inspectors, with the same output and exit codes as SQL.

use shedlock_core::LockInspector;
use shedlock_redis::{RedLockProvider, RedisLockProvider};
use shedlock_zookeeper::ZkLockProvider;

use crate::cli::{Cli, Command, DatabaseArgs, SchemaArgs};
use crate::doctor;
use crate::failure::{Exit, Failure};
use crate::locks::{self, Place};
use crate::target::{StoreKind, Target};

/// The store, for messages: `Redis`, `RedLock`, `ZooKeeper`, `a SQL database`.
pub(crate) fn describe(kind: StoreKind) -> &'static str {
    match kind {
        StoreKind::Sql(_) => "a SQL database",
        StoreKind::Redis => "Redis",
        StoreKind::RedLock => "RedLock",
        StoreKind::ZooKeeper => "ZooKeeper",
    }
}

/// Why `schema` without `--apply` has nothing to print for this store.
pub(crate) fn no_ddl(kind: StoreKind) -> Failure {
    let message = match kind {
        StoreKind::ZooKeeper => {
            "ZooKeeper has no DDL: `shedlock schema --apply` creates the root's nodes"
        }
        _ => "Redis needs no schema: a lock's hash is created when it is first acquired",
    };
    Failure::new(Exit::Usage, message)
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
        .connect_redlock(target.redis_urls())
        .await
        .map_err(|e| usage_or_unreachable(target, &e))
}

/// An invalid setting (a key prefix, a root) is a usage error; anything else means the store
/// cannot be reached.
fn usage_or_unreachable(target: &Target, error: &shedlock_core::Error) -> Failure {
    match error {
        shedlock_core::Error::InvalidConfig { .. } => {
            Failure::new(Exit::Usage, format!("{}: {error}", target.shown))
        }
        _ => unreachable(target, error),
    }
}

async fn zookeeper_provider(cli: &Cli, target: &Target) -> Result<ZkLockProvider, Failure> {
    let address = target.zookeeper()?;
    let mut builder = ZkLockProvider::builder(address.connect_string)
        .request_timeout(cli.database.connect_timeout);
    if let Some(root) = &cli.database.root {
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

/// Runs the command on a Redis, RedLock or ZooKeeper target.
pub(crate) async fn run(cli: &Cli, target: &Target) -> Result<Exit, Failure> {
    if let Command::Schema(SchemaArgs { apply: true, .. }) = &cli.command
        && target.kind != StoreKind::ZooKeeper
    {
        return Err(no_ddl(target.kind));
    }
    match target.kind {
        StoreKind::Redis => {
            let url = target.redis_urls()[0];
            let provider = redis_provider(&cli.database, url)
                .await
                .map_err(|e| usage_or_unreachable(target, &e))?;
            let place = Place {
                name: format!("key prefix `{}`", provider.key_prefix()),
                record: "hash",
            };
            match &cli.command {
                Command::Doctor => doctor::redis(&provider, target).await,
                command => run_locks(&provider, &place, command).await,
            }
        }
        StoreKind::RedLock => {
            if let Command::Doctor = cli.command {
                return doctor::redlock(&cli.database, target).await;
            }
            let provider = redlock_provider(&cli.database, target).await?;
            let place = Place {
                name: format!("key prefix `{}`", provider.key_prefix()),
                record: "hash on each master",
            };
            run_locks(&provider, &place, &cli.command).await
        }
        StoreKind::ZooKeeper => {
            let provider = zookeeper_provider(cli, target).await?;
            let place = Place {
                name: format!("root `{}`", provider.root()),
                record: "node",
            };
            match &cli.command {
                Command::Doctor => doctor::zookeeper(&provider, target).await,
                Command::Schema(_) => {
                    provider.create_schema().await.map_err(Failure::error)?;
                    out!(
                        "root `{}` is ready on {} (its clock, locks and elections nodes \
                         created if missing)",
                        provider.root(),
                        target.shown
                    );
                    Ok(Exit::Ok)
                }
                command => run_locks(&provider, &place, command).await,
            }
        }
        StoreKind::Sql(_) => unreachable!("SQL is run by `commands`"),
    }
}

async fn run_locks(
    inspector: &dyn LockInspector,
    place: &Place,
    command: &Command,
) -> Result<Exit, Failure> {
    match command {
        Command::Locks(command) => locks::run(inspector, place, command).await,
        _ => unreachable!("doctor and schema are dispatched before"),
    }
}
