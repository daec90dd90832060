//! One Redis server: `redis://[:password@]host:port[/db]` (`rediss://` with TLS), the master
//! Redis Sentinel names: `redis+sentinel://[:password@]host:port,host:port/master[/db]`
//! (`rediss+sentinel://`), or a Redis Cluster: `redis+cluster://[:password@]host:port,…`
//! (`rediss+cluster://`), all opened by the same provider from the URL. Also what RedLock's
//! masters share with it: their URLs' check, the connection to one, no schema.

use shedlock_core::async_trait;
use shedlock_redis::RedisLockProvider;
use url::Url;

use super::kind::{Kind, OpenStore, Place, Provider, Reading, Store, connect_failure};
use super::target::Target;
use crate::cli::DatabaseArgs;
use crate::doctor::reachable;
use crate::failure::{Exit, Failure};
use crate::secrets::url_list;

pub(super) const KIND: Kind = Kind {
    form: "redis://… (one server), redis+sentinel://host:port,…/master (Sentinel), \
           redis+cluster://host:port,… (Redis Cluster)",
    read,
    name: "Redis",
    options: OPTIONS,
    no_schema: NO_SCHEMA,
};

/// The options of Redis and RedLock.
pub(super) const OPTIONS: &[&str] = &["--key-prefix"];

/// A `redis://` URL alone, or a `redis+sentinel://` or `redis+cluster://` one.
fn read(target: &Target, expected: &str) -> Reading {
    let urls = urls(target)?;
    (urls.len() == 1).then(|| {
        check(&urls, expected)?;
        Ok(Box::new(Redis {
            target: target.clone(),
            url: urls[0].to_owned(),
        }) as Box<dyn Store>)
    })
}

/// The Redis URLs of a target whose scheme is `redis` or `rediss` (or a Sentinel one): one
/// server's, or RedLock's masters.
pub(super) fn urls(target: &Target) -> Option<Vec<&str>> {
    matches!(
        target.scheme(),
        Some(
            "redis"
                | "rediss"
                | "redis+sentinel"
                | "rediss+sentinel"
                | "redis+cluster"
                | "rediss+cluster"
        )
    )
    .then(|| url_list(target.url.trim()))
}

/// Checks each Redis URL (one master of a RedLock list): a `redis://` or `rediss://` URL, or
/// (alone) a Sentinel or cluster one; `expected` (every store's URL forms) ends the message
/// when one is not.
pub(super) fn check(urls: &[&str], expected: &str) -> Result<(), Failure> {
    if let [url] = urls
        && matches!(
            url.split_once("://").map(|(scheme, _)| scheme),
            Some("redis+sentinel" | "rediss+sentinel" | "redis+cluster" | "rediss+cluster")
        )
    {
        // Hosts separated by commas (sentinels, cluster nodes): the provider reads the URL.
        return Ok(());
    }
    for url in urls {
        let parsed = Url::parse(url).map_err(|e| {
            Failure::new(
                Exit::Usage,
                format!("a Redis URL is not a valid URL ({e}); {expected}"),
            )
        })?;
        match parsed.scheme() {
            "redis" | "rediss" => {}
            scheme => {
                return Err(Failure::new(
                    Exit::Usage,
                    format!("a RedLock list holds a URL with the scheme `{scheme}:`; {expected}"),
                ));
            }
        }
    }
    Ok(())
}

/// Redis and RedLock need no schema.
pub(super) const NO_SCHEMA: &str =
    "Redis needs no schema: a lock's hash is created when it is first acquired";

/// The single-server provider on `url`, with the key prefix and timeout of the command line.
/// Its releases publish the usual release hint, which wakes the lock's waiters at once.
pub(super) async fn connect(
    args: &DatabaseArgs,
    url: &str,
) -> Result<RedisLockProvider, shedlock_core::Error> {
    let mut builder = RedisLockProvider::builder().timeout(args.connect_timeout);
    if let Some(prefix) = &args.key_prefix {
        builder = builder.key_prefix(prefix);
    }
    builder.connect(url).await
}

/// One Redis server.
struct Redis {
    target: Target,
    /// The server's URL.
    url: String,
}

impl Redis {
    async fn connect(&self, args: &DatabaseArgs) -> Result<RedisLockProvider, Failure> {
        connect(args, &self.url)
            .await
            .map_err(|e| connect_failure(self, &e))
    }
}

#[async_trait(?Send)]
impl Store for Redis {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn target(&self) -> &Target {
        &self.target
    }

    /// Reachable (checked when the provider connected), its clock, its locks; its topology:
    /// the master Sentinel names or the cluster's shards, the role and replicas, and what a
    /// failover can lose.
    async fn doctor(&self, args: &DatabaseArgs) -> Result<Exit, Failure> {
        let provider = self.connect(args).await?;
        let mut exit = reachable(&provider, "Redis", &self.target.shown, "Redis").await?;
        if let Some(master) = provider.sentinel_master() {
            out!("info     Redis Sentinel names the master {master}");
        }
        if let Some(shards) = provider.cluster_shards().await {
            let shards = shards.map_err(Failure::error)?;
            let mut alone = 0;
            for shard in &shards {
                out!(
                    "info     Redis Cluster master {} serves {} slots, replicas: {}",
                    shard.master,
                    shard.slots,
                    if shard.replicas.is_empty() {
                        "none".to_owned()
                    } else {
                        shard.replicas.join(", ")
                    }
                );
                alone += usize::from(shard.replicas.is_empty());
            }
            let served: u32 = shards.iter().map(|shard| shard.slots).sum();
            if served < 16384 {
                out!(
                    "problem  Redis Cluster serves {served} of 16384 slots: locks in the others fail"
                );
                exit = Exit::Problems;
            }
            if alone < shards.len() {
                out!(
                    "warning  Redis Cluster replicates asynchronously: a failover to a replica \
                     that had not received the last grant grants that lock again while its \
                     holder runs (the library's wait_for_replicas prevents it)"
                );
            }
            return Ok(exit);
        }
        match provider.replication().await {
            Ok(replication) if replication.role != "master" => {
                out!(
                    "problem  Redis is a {} (a replica), which refuses writes: every \
                     acquisition fails",
                    replication.role
                );
                out!("fix      give the master's URL, or a redis+sentinel:// URL");
                exit = Exit::Problems;
            }
            Ok(replication) if replication.connected_replicas > 0 => out!(
                "warning  Redis is a master with {} replica(s), replicated asynchronously: a \
                 failover to a replica that had not received the last grant grants that lock \
                 again while its holder runs (the library's wait_for_replicas prevents it)",
                replication.connected_replicas
            ),
            Ok(_) => out!("info     Redis is a master without replicas: its loss stops the locks"),
            Err(error) => out!("info     Redis replication not read (INFO replication: {error})"),
        }
        Ok(exit)
    }

    async fn open(&self, args: &DatabaseArgs) -> Result<OpenStore, Failure> {
        let provider = self.connect(args).await?;
        let place = Place::new(format!("key prefix `{}`", provider.key_prefix()), "hash");
        Ok(OpenStore::new(&self.target, provider, place))
    }
}

impl Provider for RedisLockProvider {}
