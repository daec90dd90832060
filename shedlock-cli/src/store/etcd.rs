//! etcd: a cluster, `etcd://[user:password@]host:port,host:port` (its client endpoints, plain
//! HTTP), its locks under a key prefix.

use std::sync::Arc;

use shedlock_core::{Error, LockRecord, async_trait};
use shedlock_etcd::{EtcdElector, EtcdLockProvider};

use super::kind::{Kind, OpenStore, Place, Provider, Reading, Store, connect_failure};
use super::target::ClusterAddress;
use super::target::Target;
use crate::cli::DatabaseArgs;
use crate::doctor::reachable;
use crate::elections::Leaders;
use crate::failure::{Exit, Failure};

pub(super) const KIND: Kind = Kind {
    form: "etcd://host:port,…",
    read,
    name: "etcd",
    options: &["--key-prefix"],
    no_schema: NO_SCHEMA,
};

/// An `etcd://` URL.
fn read(target: &Target, _expected: &str) -> Reading {
    (target.scheme() == Some("etcd")).then(|| {
        let address = address(target)?;
        Ok(Box::new(Etcd {
            target: target.clone(),
            address,
        }) as Box<dyn Store>)
    })
}

/// The endpoints (`http://host:port,…`) and credentials of an `etcd://` URL.
pub(super) fn address(target: &Target) -> Result<ClusterAddress, Failure> {
    let form = "etcd://[user:password@]host:port,host:port";
    let (credentials, hosts) = target.hosts("etcd", form)?;
    if hosts.contains('/') {
        return Err(Failure::new(
            Exit::Usage,
            format!(
                "the etcd URL has a path (give the key prefix with --key-prefix); expected {form}"
            ),
        ));
    }
    let endpoints: Vec<String> = hosts
        .split(',')
        .map(|host| format!("http://{host}"))
        .collect();
    Ok(ClusterAddress {
        connect_string: endpoints.join(","),
        credentials,
    })
}

/// A cluster.
struct Etcd {
    target: Target,
    address: ClusterAddress,
}

impl Etcd {
    /// The provider on the cluster's endpoints, with its credentials and key prefix.
    async fn connect(&self, args: &DatabaseArgs) -> Result<EtcdLockProvider, Failure> {
        let mut builder = EtcdLockProvider::builder(&self.address.connect_string)
            .request_timeout(args.connect_timeout);
        if let Some(prefix) = &args.key_prefix {
            builder = builder.prefix(prefix);
        }
        if let Some((user, password)) = &self.address.credentials {
            builder = builder.credentials(user, password);
        }
        builder
            .connect()
            .await
            .map_err(|e| connect_failure(self, &e))
    }
}

#[async_trait(?Send)]
impl Store for Etcd {
    fn kind(&self) -> &'static Kind {
        &KIND
    }

    fn target(&self) -> &Target {
        &self.target
    }

    /// The cluster reachable (checked when the provider connected), its clock, its locks.
    async fn doctor(&self, args: &DatabaseArgs) -> Result<Exit, Failure> {
        let provider = self.connect(args).await?;
        reachable(&provider, "etcd cluster", &self.target.shown, "etcd").await
    }

    async fn open(&self, args: &DatabaseArgs) -> Result<OpenStore, Failure> {
        let provider = self.connect(args).await?;
        let place = Place::new(format!("key prefix `{}`", provider.prefix()), "key");
        let elector = provider.elector();
        let mut store = OpenStore::new(&self.target, provider, place);
        store.elector = Some(Arc::new(elector));
        Ok(store)
    }
}

const NO_SCHEMA: &str = "etcd needs no schema: a lock's key is created when it is first acquired";

impl Provider for EtcdLockProvider {}

#[async_trait]
impl Leaders for EtcdElector {
    async fn leader(&self, election: &str) -> Result<Option<LockRecord>, Error> {
        EtcdElector::leader(self, election).await
    }
}
