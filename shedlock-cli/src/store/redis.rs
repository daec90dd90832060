//! One Redis server: `redis://[:password@]host:port[/db]` (`rediss://` with TLS). Also what
//! RedLock's masters share with it: their URLs' check, the connection to one, no schema.

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
    form: "redis://… (one server)",
    read,
    name: "Redis",
    options: OPTIONS,
    no_schema: NO_SCHEMA,
};

/// The options of Redis and RedLock.
pub(super) const OPTIONS: &[&str] = &["--key-prefix"];

/// A `redis://` URL alone.
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

/// The Redis URLs of a target whose scheme is `redis` or `rediss`: one server's, or RedLock's
/// masters.
pub(super) fn urls(target: &Target) -> Option<Vec<&str>> {
    matches!(target.scheme(), Some("redis" | "rediss")).then(|| url_list(target.url.trim()))
}

/// Checks each Redis URL (one master of a RedLock list): a `redis://` or `rediss://` URL;
/// `expected` (every store's URL forms) ends the message when one is not.
pub(super) fn check(urls: &[&str], expected: &str) -> Result<(), Failure> {
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

    /// Reachable (checked when the provider connected), its clock, its locks.
    async fn doctor(&self, args: &DatabaseArgs) -> Result<Exit, Failure> {
        let provider = self.connect(args).await?;
        reachable(&provider, "Redis", &self.target.shown, "Redis").await
    }

    async fn open(&self, args: &DatabaseArgs) -> Result<OpenStore, Failure> {
        let provider = self.connect(args).await?;
        let place = Place::new(format!("key prefix `{}`", provider.key_prefix()), "hash");
        Ok(OpenStore::new(&self.target, provider, place))
    }
}

impl Provider for RedisLockProvider {}
