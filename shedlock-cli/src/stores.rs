//! The stores other than SQL: one Redis server, RedLock masters, ZooKeeper and etcd, opened from the
//! target and run through their inspectors, with the same output and exit codes as SQL.

use shedlock_core::{LockInspector, LockProvider};

use crate::cli::{Cli, Command, SchemaArgs};
use crate::connect::{
    etcd_provider, redis_provider, redlock_provider, usage_or_unreachable, zookeeper_provider,
};
use crate::elections::{StoreElector, WithElector};
use crate::failure::{Exit, Failure};
use crate::locks::{self, Place};
use crate::runs;
use crate::target::{StoreKind, Target};
use crate::{dashboard, doctor};

/// Why `schema` without `--apply` has nothing to print for this store.
pub(crate) fn no_ddl(kind: StoreKind) -> Failure {
    let message = match kind {
        StoreKind::ZooKeeper => {
            "ZooKeeper has no DDL: `shedlock schema --apply` creates the root's nodes"
        }
        StoreKind::Etcd => {
            "etcd needs no schema: a lock's key is created when it is first acquired"
        }
        _ => "Redis needs no schema: a lock's hash is created when it is first acquired",
    };
    Failure::new(Exit::Usage, message)
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
            let place = Place::new(format!("key prefix `{}`", provider.key_prefix()), "hash");
            match &cli.command {
                Command::Doctor => doctor::redis(&provider, target).await,
                command => run_locks(&provider, &place, command, target, None).await,
            }
        }
        StoreKind::RedLock => {
            if let Command::Doctor = cli.command {
                return doctor::redlock(&cli.database, target).await;
            }
            let provider = redlock_provider(&cli.database, target).await?;
            let place = Place::new(
                format!("key prefix `{}`", provider.key_prefix()),
                "hash on each master",
            );
            run_locks(&provider, &place, &cli.command, target, None).await
        }
        StoreKind::ZooKeeper => {
            let provider = zookeeper_provider(&cli.database, target).await?;
            let place = Place::new(format!("root `{}`", provider.root()), "node");
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
                command => {
                    let elector = StoreElector::ZooKeeper(provider.elector());
                    run_locks(&provider, &place, command, target, Some(elector)).await
                }
            }
        }
        StoreKind::Etcd => {
            let provider = etcd_provider(&cli.database, target).await?;
            let place = Place::new(format!("key prefix `{}`", provider.prefix()), "key");
            match &cli.command {
                Command::Doctor => doctor::etcd(&provider, target).await,
                command => {
                    let elector = StoreElector::Etcd(provider.elector());
                    run_locks(&provider, &place, command, target, Some(elector)).await
                }
            }
        }
        StoreKind::Sql(_) => unreachable!("SQL is run by `commands`"),
    }
}

/// `elector`: the store's own election recipe, whose leaders the dashboard shows too.
async fn run_locks<P: LockInspector + LockProvider + Clone>(
    provider: &P,
    place: &Place,
    command: &Command,
    target: &Target,
    elector: Option<StoreElector>,
) -> Result<Exit, Failure> {
    match command {
        // An election run by the store's own elector is found where it keeps its leader.
        Command::Dashboard(args) => match elector {
            Some(elector) => {
                let provider = WithElector::new(provider.clone(), elector);
                dashboard::run(provider, &target.shown, args).await
            }
            None => dashboard::run(provider.clone(), &target.shown, args).await,
        },
        Command::Locks(command) => locks::run(provider, place, command).await,
        Command::Runs(command) => runs::run(provider.run_log(), place, command).await,
        _ => unreachable!("doctor and schema are dispatched before"),
    }
}
