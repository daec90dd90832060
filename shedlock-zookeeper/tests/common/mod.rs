//! What the ZooKeeper test files share: providers and clients on the test ensemble, digest
//! credentials, log capture and the conformance harness over a provider. The connect string
//! (skip locally, fail on CI), unique roots and the harness come from `shedlock-test-support`.

#![allow(dead_code)] // each test binary uses a different part

use std::sync::{Arc, Mutex};
use std::time::Duration;

use shedlock_conformance::Harness;
use shedlock_conformance::runs::RunsHarness;
use shedlock_core::{LockProvider, RunLog};
use shedlock_zookeeper::{ZkLockProvider, ZkLockProviderBuilder};

use shedlock_conformance::ServerHarness;
use shedlock_test_support::names::ZK_TEST_PARENT;
pub(crate) use shedlock_test_support::{unique_zk_root, zk_url};

/// The user of the tests' digest credentials.
pub(crate) const DIGEST_USER: &str = "shedlock-test-app";
/// The password of the tests' digest credentials.
pub(crate) const DIGEST_PASSWORD: &str = "pw-9f2c-not-for-output";

/// Creates the parent of the test roots open to everyone if it is missing, the way an
/// administrator prepares a shared parent: an authenticated provider creating it would close
/// it to the tests that run without credentials.
pub(crate) async fn open_test_parent() {
    let open =
        zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    raw_client()
        .await
        .mkdir(ZK_TEST_PARENT, &open)
        .await
        .expect("create the tests' parent node");
}

/// A builder of the tests' providers: a root of its own (made of `base`), holder `tester`;
/// `None` when skipped.
fn builder(base: &str) -> Option<ZkLockProviderBuilder> {
    let builder = ZkLockProvider::builder(zk_url()?);
    Some(builder.root(unique_zk_root(base)).holder("tester"))
}

/// The provider `builder` connects, schema created.
async fn with_schema(builder: ZkLockProviderBuilder) -> ZkLockProvider {
    let provider = builder
        .connect()
        .await
        .expect("connect to SHEDLOCK_TEST_ZK_URL");
    provider.create_schema().await.expect("create the schema");
    provider
}

/// A provider with the tests' digest credentials on a root of its own, schema created.
pub(crate) async fn authenticated_provider(base: &str) -> Option<ZkLockProvider> {
    let builder = builder(base)?;
    open_test_parent().await;
    Some(with_schema(builder.digest_auth(DIGEST_USER, DIGEST_PASSWORD)).await)
}

/// A client of its own authenticated as `user:password`.
pub(crate) async fn client_as(user: &str, password: &str) -> zookeeper_client::Client {
    zookeeper_client::Client::connector()
        .with_auth("digest", format!("{user}:{password}").as_bytes())
        .connect(&zk_url().expect("SHEDLOCK_TEST_ZK_URL"))
        .await
        .expect("connect to SHEDLOCK_TEST_ZK_URL")
}

/// A provider on a root of its own, schema created.
pub(crate) async fn provider(base: &str) -> Option<ZkLockProvider> {
    Some(with_schema(builder(base)?).await)
}

/// A client of its own on the ensemble, without credentials: the operator's or another
/// application's view.
pub(crate) async fn raw_client() -> zookeeper_client::Client {
    zookeeper_client::Client::connect(&zk_url().expect("SHEDLOCK_TEST_ZK_URL"))
        .await
        .expect("connect to SHEDLOCK_TEST_ZK_URL")
}

/// `path` and everything below it, deleted the way an operator's `deleteall` does.
pub(crate) async fn delete_all(client: &zookeeper_client::Client, path: &str) {
    let mut pending = vec![path.to_owned()];
    let mut found = Vec::new();
    while let Some(node) = pending.pop() {
        for child in client.list_children(&node).await.unwrap_or_default() {
            pending.push(format!("{node}/{child}"));
        }
        found.push(node);
    }
    // Deepest first: a node is deleted after its children.
    for node in found.iter().rev() {
        match client.delete(node, None).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(error) => panic!("deleting {node}: {error}"),
        }
    }
}

/// The message of the store error `result` must be (of its source, which names the node).
pub(crate) fn store_error<T: std::fmt::Debug>(result: Result<T, shedlock_core::Error>) -> String {
    match result {
        Err(shedlock_core::Error::Store { source, .. }) => source.to_string(),
        other => panic!("expected a store error, got {other:?}"),
    }
}

/// `node`'s ACL, as `owner` reads it: one entry, everything for the tests' digest user (a
/// hash, never the password).
pub(crate) async fn assert_digest_only(owner: &zookeeper_client::Client, node: &str) {
    let (acl, _) = owner.get_acl(node).await.expect("read the ACL");
    assert_eq!(acl.len(), 1, "{node}: {acl:?}");
    assert_eq!(
        (acl[0].scheme(), acl[0].permission()),
        ("digest", zookeeper_client::Permission::ALL),
        "{node}"
    );
    assert!(
        acl[0].id().starts_with(&format!("{DIGEST_USER}:")),
        "{node}: {acl:?}"
    );
    assert!(
        !acl[0].id().contains(DIGEST_PASSWORD),
        "a hash, not the password"
    );
}

/// Log lines, captured.
#[derive(Clone, Default)]
pub(crate) struct Captured(Arc<Mutex<Vec<u8>>>);

impl Captured {
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

impl std::io::Write for Captured {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Captures every log line (TRACE, every crate) of this thread until the guard is dropped. Use
/// a current-thread runtime, so that spawned tasks (the client's sessions, campaigns) log here.
pub(crate) fn capture_logs() -> (Captured, tracing::subscriber::DefaultGuard) {
    let logs = Captured::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    (logs, tracing::subscriber::set_default(subscriber))
}

/// The conformance harness on `provider`'s root: a provider per holder on it, and the
/// provider itself as inspector.
pub(crate) fn harness_over(provider: ZkLockProvider) -> ServerHarness {
    let inspector = provider.clone();
    ServerHarness::new(move |holder| Arc::new(provider.with_holder(holder).expect("valid holder")))
        .with_inspector(inspector)
}

/// The run-record harness on `provider`'s root: a provider per holder on it, the provider
/// itself as run log, and providers with other run settings on the same root and credentials.
pub(crate) struct RunsOn {
    provider: ZkLockProvider,
    authenticated: bool,
}

impl RunsOn {
    /// On `provider`, built with the tests' digest credentials when `authenticated`.
    pub(crate) fn new(provider: ZkLockProvider, authenticated: bool) -> Self {
        RunsOn {
            provider,
            authenticated,
        }
    }

    /// A provider on the same root and credentials keeping `runs_per_lock` for `retention`.
    pub(crate) async fn keeping(&self, retention: Duration, runs_per_lock: u32) -> ZkLockProvider {
        let mut builder = ZkLockProvider::builder(zk_url().expect("SHEDLOCK_TEST_ZK_URL"))
            .root(self.provider.root())
            .holder("tester")
            .run_retention(retention)
            .runs_per_lock(runs_per_lock);
        if self.authenticated {
            builder = builder.digest_auth(DIGEST_USER, DIGEST_PASSWORD);
        }
        builder
            .connect()
            .await
            .expect("connect to SHEDLOCK_TEST_ZK_URL")
    }

    pub(crate) fn zk(&self) -> &ZkLockProvider {
        &self.provider
    }
}

#[shedlock_core::async_trait]
impl Harness for RunsOn {
    async fn provider(&self, holder: &str) -> Arc<dyn LockProvider> {
        Arc::new(self.provider.with_holder(holder).expect("valid holder"))
    }

    async fn pass_time(&self, duration: Duration) {
        // The ensemble's clock cannot be stepped: time passes by waiting.
        tokio::time::sleep(duration).await;
    }
}

#[shedlock_core::async_trait]
impl RunsHarness for RunsOn {
    async fn run_log(&self) -> Arc<dyn RunLog> {
        Arc::new(self.provider.clone())
    }

    async fn run_log_keeping(&self, retention: Duration, runs_per_lock: u32) -> Arc<dyn RunLog> {
        Arc::new(self.keeping(retention, runs_per_lock).await)
    }
}

/// The run nodes of `lock` under `root`, counted in ZooKeeper (0 when its directory is gone),
/// and whether its directory exists.
pub(crate) async fn run_nodes(
    client: &zookeeper_client::Client,
    root: &str,
    lock: &str,
) -> (usize, bool) {
    match client.list_children(&format!("{root}/runs/{lock}")).await {
        Ok(names) => (names.len(), true),
        Err(zookeeper_client::Error::NoNode) => (0, false),
        Err(error) => panic!("listing {lock}'s runs: {error}"),
    }
}
