//! `rediss://`: the providers over TLS (redis-rs's rustls support, the `tls` feature), against
//! a private `redis-server --tls-port` whose certificate the test makes with the `openssl`
//! command: a root of its own and a server certificate for `localhost` signed by it; and
//! `rediss+sentinel://`, a TLS sentinel watching such a server, and `rediss+cluster://`, a
//! cluster of three TLS-only masters. Skipped (failed when `CI=true`) without `redis-server`
//! or `openssl`.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use shedlock_conformance::unique_lock_name;
use shedlock_conformance::{env::skip, unique_key_prefix};
use shedlock_core::{
    Error, LockConfiguration, LockInspector, LockProvider, LockQuery, RunEnd, RunQuery, RunStart,
};
use shedlock_redis::{RedLockProvider, RedisLockProvider};
use shedlock_test_support::RedisServer;

/// A directory of its own for a test's certificates, removed at the end.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Runs `openssl` with `args` in `dir`; false when it failed.
fn openssl(dir: &Path, args: &[&str]) -> bool {
    Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success())
}

/// A root certificate (`ca.pem`) and a server certificate for `localhost` and 127.0.0.1 signed
/// by it (`server.pem`, `server.key`), made now; `None` after a `skipped:` line when `openssl`
/// is not installed.
fn certificates() -> Option<TempDir> {
    let dir = std::env::temp_dir().join(unique_key_prefix("shedlock-tls").trim_end_matches(':'));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let dir = TempDir(dir);
    if !openssl(&dir.0, &["version"]) {
        skip("openssl not installed (apt-get install openssl)");
        return None;
    }
    std::fs::write(
        dir.0.join("server.ext"),
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    let steps: [&[&str]; 3] = [
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "2",
            "-subj",
            "/CN=shedlock test root",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
        ],
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=localhost",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
        ],
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "server.ext",
            "-out",
            "server.pem",
        ],
    ];
    for step in steps {
        assert!(openssl(&dir.0, step), "openssl {step:?} failed");
    }
    Some(dir)
}

/// A free port on 127.0.0.1.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// A private server answering TLS on its own port, with a password: the server and its TLS
/// port. `None` when skipped.
fn tls_server(certs: &TempDir) -> Option<(RedisServer, u16)> {
    let port = free_port();
    let file = |name: &str| certs.0.join(name).to_str().unwrap().to_owned();
    let (cert, key, ca) = (file("server.pem"), file("server.key"), file("ca.pem"));
    let port_arg = port.to_string();
    let server = RedisServer::start(&[
        "--requirepass",
        "s3cr3t-tls",
        "--tls-port",
        &port_arg,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-ca-cert-file",
        &ca,
        "--tls-auth-clients",
        "no",
    ])?;
    Some((server, port))
}

fn root(certs: &TempDir) -> Vec<u8> {
    std::fs::read(certs.0.join("ca.pem")).expect("the root certificate")
}

/// Issue 29 item 7: a `rediss://` URL connects (it failed with "the feature is not enabled"):
/// a lock is taken and released, a run recorded and read, all over TLS, and the server the
/// provider names is the `rediss://` one, without the password.
#[tokio::test]
async fn a_provider_works_over_tls() {
    let Some(certs) = certificates() else { return };
    let Some((_server, port)) = tls_server(&certs) else {
        return;
    };
    let provider = RedisLockProvider::builder()
        .key_prefix(unique_key_prefix("tls"))
        .holder("a")
        .tls_root_certificates(root(&certs))
        .connect(&format!("rediss://:s3cr3t-tls@localhost:{port}"))
        .await
        .expect("connect over TLS");
    assert_eq!(provider.server(), format!("rediss://localhost:{port}/0"));
    let lock = unique_lock_name("tls");
    let config = LockConfiguration::new(&lock, Duration::from_secs(30), Duration::ZERO).unwrap();
    let lease = provider.acquire(&config).await.unwrap().expect("acquired");
    let listed = provider.list_locks(&LockQuery::all()).await.unwrap();
    assert!(
        listed.iter().any(|record| record.name == lock),
        "{listed:?}"
    );
    let log = provider.run_log().expect("a run log");
    let start = RunStart::new(&lock, "job", None, "a", lease.fencing_token());
    log.run_started(&start).await.unwrap();
    log.run_finished(&start, &RunEnd::succeeded())
        .await
        .unwrap();
    let runs = log.runs(&RunQuery::lock(&lock)).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert!(provider.release(&lease).await.unwrap());
}

/// RedLock over TLS masters: each URL is `rediss://`, with the same root.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_works_over_tls() {
    let Some(certs) = certificates() else { return };
    let mut servers = Vec::new();
    for _ in 0..3 {
        let Some(server) = tls_server(&certs) else {
            return;
        };
        servers.push(server);
    }
    let urls: Vec<String> = servers
        .iter()
        .map(|(_, port)| format!("rediss://:s3cr3t-tls@localhost:{port}"))
        .collect();
    let provider = RedLockProvider::builder()
        .holder("a")
        .tls_root_certificates(root(&certs))
        .connect(&urls)
        .await
        .expect("connect to the masters over TLS");
    let config = LockConfiguration::new(
        unique_lock_name("tls"),
        Duration::from_secs(30),
        Duration::ZERO,
    )
    .unwrap();
    let lease = provider.acquire(&config).await.unwrap().expect("acquired");
    assert!(provider.release(&lease).await.unwrap());
}

/// A server whose certificate the client does not trust is refused with a store error that
/// says so, without the password; roots given for a plain `redis://` URL are a configuration
/// error naming the setting.
#[tokio::test]
async fn an_untrusted_server_is_refused() {
    let Some(certs) = certificates() else { return };
    let Some((server, port)) = tls_server(&certs) else {
        return;
    };
    let refused = RedisLockProvider::builder()
        .timeout(Duration::from_secs(2))
        .connect(&format!("rediss://:s3cr3t-tls@localhost:{port}"))
        .await;
    let Err(error @ Error::Store { .. }) = &refused else {
        panic!("an untrusted certificate was accepted: {refused:?}");
    };
    let text = format!("{error} {:?}", std::error::Error::source(error));
    assert!(
        text.contains("certificate") && text.contains("SSL_CERT_FILE"),
        "says what to trust: {text}"
    );
    assert!(!text.contains("s3cr3t"), "{text}");
    let unchecked = RedisLockProvider::builder()
        .timeout(Duration::from_secs(2))
        .connect(&format!("rediss://:s3cr3t-tls@localhost:{port}/#insecure"))
        .await;
    assert!(
        unchecked.is_err(),
        "a certificate left unchecked: {unchecked:?}"
    );

    let plain = RedisLockProvider::builder()
        .tls_root_certificates(root(&certs))
        .connect(&server.url())
        .await;
    let Err(Error::InvalidConfig { field, .. }) = &plain else {
        panic!("roots for a plain URL were accepted: {plain:?}");
    };
    assert_eq!(*field, "tls_root_certificates");
}

/// A sentinel answering TLS only on a free port, watching the master on `master_port` over
/// TLS with its password; killed when dropped.
struct TlsSentinel {
    port: u16,
    child: std::process::Child,
}

impl Drop for TlsSentinel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TlsSentinel {
    fn start(certs: &TempDir, master_port: u16) -> TlsSentinel {
        let port = free_port();
        let file = |name: &str| certs.0.join(name).display().to_string();
        let conf = certs.0.join(format!("sentinel-{port}.conf"));
        std::fs::write(
            &conf,
            format!(
                "port 0\ntls-port {port}\nbind 127.0.0.1\ndir {dir}\n\
                 tls-cert-file {cert}\ntls-key-file {key}\ntls-ca-cert-file {ca}\n\
                 tls-auth-clients no\ntls-replication yes\n\
                 sentinel monitor tls 127.0.0.1 {master_port} 1\n\
                 sentinel auth-pass tls s3cr3t-tls\n",
                dir = certs.0.display(),
                cert = file("server.pem"),
                key = file("server.key"),
                ca = file("ca.pem"),
            ),
        )
        .unwrap();
        let child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server --sentinel");
        TlsSentinel { port, child }
    }
}

/// Issue 33: `rediss+sentinel://`: the sentinel and the master it names are both reached over
/// TLS with the given root, the master's password from the URL; the provider names the
/// sentinel, not the password, and the master it found.
#[tokio::test]
async fn a_provider_works_through_sentinel_over_tls() {
    let Some(certs) = certificates() else { return };
    let Some((_server, port)) = tls_server(&certs) else {
        return;
    };
    let sentinel = TlsSentinel::start(&certs, port);
    let url = format!(
        "rediss+sentinel://:s3cr3t-tls@localhost:{}/tls",
        sentinel.port
    );
    let connect = || {
        RedisLockProvider::builder()
            .key_prefix(unique_key_prefix("tls-sentinel"))
            .holder("a")
            .tls_root_certificates(root(&certs))
            .connect(&url)
    };
    // The sentinel takes a moment to listen: its first answer is awaited (10 s at most).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let provider = loop {
        match connect().await {
            Ok(provider) => break provider,
            Err(error) => {
                assert!(!error.to_string().contains("s3cr3t"), "{error}");
                assert!(
                    std::time::Instant::now() < deadline,
                    "no master through the TLS sentinel: {error}"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    assert_eq!(
        provider.server(),
        format!("rediss+sentinel://localhost:{}/tls", sentinel.port)
    );
    assert_eq!(
        provider.sentinel_master(),
        Some(format!("127.0.0.1:{port}"))
    );
    let config = LockConfiguration::new(
        unique_lock_name("tls"),
        Duration::from_secs(30),
        Duration::ZERO,
    )
    .unwrap();
    let lease = provider.acquire(&config).await.unwrap().expect("acquired");
    assert!(provider.release(&lease).await.unwrap());
}

/// A cluster node answering TLS only (its cluster bus too) on a free port, with a password;
/// killed when dropped.
struct TlsClusterNode {
    port: u16,
    child: std::process::Child,
}

impl Drop for TlsClusterNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl TlsClusterNode {
    /// Starts the node and waits until its port takes connections (10 s at most).
    fn start(certs: &TempDir) -> TlsClusterNode {
        let port = free_port();
        let file = |name: &str| certs.0.join(name).display().to_string();
        let args: Vec<String> = [
            "--port",
            "0",
            "--tls-port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--dir",
            &certs.0.display().to_string(),
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            &format!("nodes-{port}.conf"),
            "--tls-cluster",
            "yes",
            "--tls-cert-file",
            &file("server.pem"),
            "--tls-key-file",
            &file("server.key"),
            "--tls-ca-cert-file",
            &file("ca.pem"),
            "--tls-auth-clients",
            "no",
            "--requirepass",
            "s3cr3t-tls",
            "--masterauth",
            "s3cr3t-tls",
            "--save",
            "",
            "--appendonly",
            "no",
        ]
        .map(str::to_owned)
        .into();
        let child = Command::new("redis-server")
            .args(&args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        let node = TlsClusterNode { port, child };
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                std::time::Instant::now() < deadline,
                "the TLS cluster node on {port} did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        node
    }
}

/// Issue 33: `rediss+cluster://`: three TLS-only masters (their cluster bus over TLS too) made
/// a cluster by `redis-cli --tls --cluster create`; the provider reaches every master over TLS
/// with the given root and the password from the URL: a batch across the slots is granted and
/// listed back, and the provider names the nodes, not the password.
#[tokio::test]
async fn a_provider_works_on_a_cluster_over_tls() {
    let Some(certs) = certificates() else { return };
    if RedisServer::start(&[]).is_none() {
        return;
    }
    let nodes: Vec<TlsClusterNode> = (0..3).map(|_| TlsClusterNode::start(&certs)).collect();
    let addresses: Vec<String> = nodes
        .iter()
        .map(|node| format!("127.0.0.1:{}", node.port))
        .collect();
    let ca = certs.0.join("ca.pem").display().to_string();
    let created = Command::new("redis-cli")
        .args([
            "--tls",
            "--cacert",
            &ca,
            "--no-auth-warning",
            "-a",
            "s3cr3t-tls",
        ])
        .args(["--cluster", "create"])
        .args(&addresses)
        .args(["--cluster-yes"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("redis-cli");
    assert!(created.success(), "redis-cli --tls --cluster create failed");
    let url = format!("rediss+cluster://:s3cr3t-tls@{}", addresses.join(","));
    let connect = || {
        RedisLockProvider::builder()
            .key_prefix(unique_key_prefix("tls-cluster"))
            .holder("a")
            .tls_root_certificates(root(&certs))
            .connect(&url)
    };
    // The cluster serves every slot a moment after it is made: its first answer is awaited.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let (provider, configs) = loop {
        let attempt = async {
            let provider = connect().await?;
            let configs: Vec<LockConfiguration> = (0..20)
                .map(|i| {
                    LockConfiguration::new(
                        format!("tls-{i}"),
                        Duration::from_secs(30),
                        Duration::ZERO,
                    )
                    .unwrap()
                })
                .collect();
            for answer in provider.acquire_many(&configs).await {
                answer?.expect("granted");
            }
            Ok::<_, Error>((provider, configs))
        };
        match attempt.await {
            Ok(done) => break done,
            Err(error) => {
                assert!(!error.to_string().contains("s3cr3t"), "{error}");
                assert!(
                    std::time::Instant::now() < deadline,
                    "no lock granted on the TLS cluster: {error}"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    assert!(provider.server().starts_with("rediss+cluster://127.0.0.1:"));
    assert!(!provider.server().contains("s3cr3t"));
    let listed = provider.list_locks(&LockQuery::all()).await.unwrap();
    assert_eq!(listed.len(), configs.len(), "{listed:?}");
    let shards = provider.cluster_shards().await.expect("a cluster").unwrap();
    assert_eq!(shards.len(), 3, "{shards:?}");
}
