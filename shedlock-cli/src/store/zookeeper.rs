//! ZooKeeper: an ensemble, `zookeeper://[user:password@]host:port,host:port[/chroot]` (`zk://`
//! too; the credentials are digest ones), its locks under a root node.

use std::sync::Arc;

use shedlock_core::{Error, LockRecord, async_trait};
use shedlock_zookeeper::{ZkElector, ZkLockProvider};

use super::kind::{Kind, OpenStore, Place, Provider, Reading, Store, connect_failure};
use super::target::ClusterAddress;
use super::target::Target;
use crate::cli::DatabaseArgs;
use crate::doctor::{clock, count_locks};
use crate::elections::Leaders;
use crate::failure::{Exit, Failure};

pub(super) const KIND: Kind = Kind {
    form: "zookeeper://host:port,…",
    read,
    name: "ZooKeeper",
    options: &["--root"],
    no_schema: "ZooKeeper has no DDL: `shedlock schema --apply` creates the root's nodes",
};

/// A `zookeeper://` or `zk://` URL.
fn read(target: &Target, _expected: &str) -> Reading {
    matches!(target.scheme(), Some("zookeeper" | "zk")).then(|| {
        let address = address(target)?;
        Ok(Box::new(ZooKeeper {
            target: target.clone(),
            address,
        }) as Box<dyn Store>)
    })
}

/// The connect string and credentials of a `zookeeper://` URL.
pub(super) fn address(target: &Target) -> Result<ClusterAddress, Failure> {
    let (credentials, hosts) = target.hosts(
        "ZooKeeper",
        "zookeeper://[user:password@]host:port,host:port[/chroot]",
    )?;
    Ok(ClusterAddress {
        connect_string: hosts.to_owned(),
        credentials,
    })
}

/// An ensemble.
struct ZooKeeper {
    target: Target,
    address: ClusterAddress,
}

impl ZooKeeper {
    async fn connect(&self, args: &DatabaseArgs) -> Result<ZkLockProvider, Failure> {
        let mut builder = ZkLockProvider::builder(&self.address.connect_string)
            .request_timeout(args.connect_timeout);
        if let Some(root) = &args.root {
            builder = builder.root(root);
        }
        if let Some((user, password)) = &self.address.credentials {
            builder = builder.digest_auth(user, password);
        }
        builder
            .connect()
            .await
            .map_err(|e| connect_failure(self, &e))
    }
}

#[async_trait(?Send)]
impl Store for ZooKeeper {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn target(&self) -> &Target {
        &self.target
    }

    async fn apply_schema(&self, args: &DatabaseArgs) -> Result<Exit, Failure> {
        let provider = self.connect(args).await?;
        provider.create_schema().await.map_err(Failure::error)?;
        out!(
            "root `{}` is ready on {} (its clock, locks and elections nodes created if missing)",
            provider.root(),
            self.target.shown
        );
        Ok(Exit::Ok)
    }

    /// Reaching the ensemble was checked when the provider connected. The clock is read by a
    /// write to `<root>/clock`, so it checks the root's nodes and the session's rights on them.
    async fn doctor(&self, args: &DatabaseArgs) -> Result<Exit, Failure> {
        let provider = self.connect(args).await?;
        out!(
            "ok       ZooKeeper ensemble {} is reachable",
            self.target.shown
        );
        if let Err(failure) = clock(&provider, "ZooKeeper").await {
            let message = failure.message;
            out!("problem  {message}");
            let fix = if message.contains("does not exist") {
                format!(
                    "create them: `shedlock schema --apply --root {}` with the same URL",
                    provider.root()
                )
            } else if message.contains("not authorized") {
                "give the URL the digest credentials of the user that created the nodes: \
                 zookeeper://USER:PASSWORD@host:port,…"
                    .to_owned()
            } else {
                "check that the ensemble has a quorum and the root is right (--root)".to_owned()
            };
            out!("fix      {fix}");
            return Ok(Exit::Problems);
        }
        out!(
            "ok       root `{}`: its clock node is writable with this URL's credentials",
            provider.root()
        );
        count_locks(&provider).await?;
        Ok(Exit::Ok)
    }

    async fn open(&self, args: &DatabaseArgs) -> Result<OpenStore, Failure> {
        let provider = self.connect(args).await?;
        let place = Place::new(format!("root `{}`", provider.root()), "node");
        let elector = provider.elector();
        let mut store = OpenStore::new(&self.target, provider, place);
        store.elector = Some(Arc::new(elector));
        Ok(store)
    }
}

impl Provider for ZkLockProvider {}

#[async_trait]
impl Leaders for ZkElector {
    async fn leader(&self, election: &str) -> Result<Option<LockRecord>, Error> {
        ZkElector::leader(self, election).await
    }
}
