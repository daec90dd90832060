//! RedLock: independent Redis masters, their URLs separated by commas
//! (`redis://h1:6379,redis://h2:6379,redis://h3:6379`); a lock is held on a majority.

use std::time::{Duration, SystemTime};

use shedlock_core::async_trait;
use shedlock_redis::RedLockProvider;

use super::kind::{Kind, OpenStore, Place, Provider, Reading, Store, connect_failure};
use super::redis;
use super::target::Target;
use crate::cli::DatabaseArgs;
use crate::doctor::{clock, count_locks, millis};
use crate::failure::{Exit, Failure};
use crate::secrets::Masked;

pub(super) const KIND: Kind = Kind {
    form: "redis://…,redis://…,… (RedLock masters)",
    read,
    name: "RedLock",
    options: redis::OPTIONS,
    no_schema: redis::NO_SCHEMA,
};

/// `redis://` URLs separated by commas.
fn read(target: &Target, expected: &str) -> Reading {
    let urls = redis::urls(target)?;
    (urls.len() != 1).then(|| {
        redis::check(&urls, expected)?;
        let masters = urls.iter().map(|url| (*url).to_owned()).collect();
        Ok(Box::new(RedLock {
            target: target.clone(),
            masters,
        }) as Box<dyn Store>)
    })
}

/// Masters under RedLock.
struct RedLock {
    target: Target,
    /// Each master's URL.
    masters: Vec<String>,
}

impl RedLock {
    async fn connect(&self, args: &DatabaseArgs) -> Result<RedLockProvider, Failure> {
        let mut builder = RedLockProvider::builder().timeout(args.connect_timeout);
        if let Some(prefix) = &args.key_prefix {
            builder = builder.key_prefix(prefix);
        }
        builder
            .connect(&self.masters)
            .await
            .map_err(|e| connect_failure(self, &e))
    }
}

#[async_trait(?Send)]
impl Store for RedLock {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn target(&self) -> &Target {
        &self.target
    }

    /// Each master on its own (reachable, clock), how far the masters' clocks are apart, and
    /// the locks as a majority agrees on them. A master down is a problem even while a
    /// majority answers: one more failure stops every lock.
    async fn doctor(&self, args: &DatabaseArgs) -> Result<Exit, Failure> {
        let masters = self.masters.len();
        let quorum = masters / 2 + 1;
        let mut clocks: Vec<SystemTime> = Vec::new();
        for url in &self.masters {
            let shown = Masked::any(url).shown;
            match redis::connect(args, url).await {
                Ok(master) => {
                    out!("ok       master {shown} is reachable");
                    clocks.push(clock(&master, "master").await?);
                }
                Err(error) => {
                    out!("problem  master {shown} cannot be reached: {error}");
                    out!(
                        "fix      start it or fix its address: with {} of {masters} masters \
                         down the locks stop",
                        masters - quorum + 1,
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
                "problem  {} of {masters} masters answer; RedLock needs {quorum}",
                clocks.len(),
            );
            return Ok(Exit::Problems);
        }
        let provider = self.connect(args).await?;
        out!(
            "ok       {} of {masters} masters answer (RedLock needs {quorum})",
            clocks.len(),
        );
        count_locks(&provider).await?;
        Ok(if clocks.len() == masters {
            Exit::Ok
        } else {
            Exit::Problems
        })
    }

    async fn open(&self, args: &DatabaseArgs) -> Result<OpenStore, Failure> {
        let provider = self.connect(args).await?;
        let prefix = format!("key prefix `{}`", provider.key_prefix());
        let place = Place::new(prefix, "hash on each master");
        Ok(OpenStore::new(&self.target, provider, place))
    }
}

impl Provider for RedLockProvider {}
