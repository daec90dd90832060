//! Credentials: a private single-member etcd with auth enabled (started here, on free ports):
//! the right password works (also after etcd's token expired), a wrong one is a store error,
//! and no error, `Debug` output or log line (TRACE, every crate) shows the password. Needs
//! `etcd` and `etcdctl` (Debian's `etcd-server` and `etcd-client`); skipped without them,
//! failed without them when `CI=true`.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shedlock_conformance::{env::on_ci, env::skip};
use shedlock_core::{Error, LockConfiguration, LockProvider};
use shedlock_etcd::{EtcdElector, EtcdLockProvider};
use shedlock_test_support::stores::free_port;

const SECRET: &str = "pw-e7cd-not-for-output";

fn assert_hidden(what: &str, shown: &str) {
    assert!(
        !shown.contains(SECRET),
        "{what} shows the password: {shown}"
    );
}

/// A single-member etcd of this test's own, with user `root` (password [`SECRET`]) and auth
/// enabled; killed and its directory removed on drop.
struct PrivateEtcd {
    child: Child,
    dir: std::path::PathBuf,
    url: String,
}

impl PrivateEtcd {
    fn start() -> Option<PrivateEtcd> {
        if Command::new("etcd").arg("--version").output().is_err() {
            let reason = "etcd is not installed (apt-get install etcd-server etcd-client)";
            assert!(!on_ci(), "{reason}");
            skip(reason);
            return None;
        }
        let (client, peer) = (free_port(), free_port());
        let url = format!("http://127.0.0.1:{client}");
        let dir = std::env::temp_dir().join(format!(
            "shedlock-etcd-auth-{}-{client}",
            std::process::id()
        ));
        let child = Command::new("etcd")
            .args(["--name", "auth", "--data-dir"])
            .arg(&dir)
            .args([
                "--listen-client-urls",
                &url,
                "--advertise-client-urls",
                &url,
            ])
            .args(["--listen-peer-urls", &format!("http://127.0.0.1:{peer}")])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://127.0.0.1:{peer}"),
            ])
            .args([
                "--initial-cluster",
                &format!("auth=http://127.0.0.1:{peer}"),
            ])
            // Tokens expire after 2 s (default 5 min), so the test sees one renewed.
            .args(["--auth-token", "simple", "--auth-token-ttl", "2"])
            .args(["--logger", "zap", "--log-level", "error"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start etcd");
        let etcd = PrivateEtcd { child, dir, url };
        let ready = (0..100).any(|_| {
            std::thread::sleep(Duration::from_millis(100));
            etcd.etcdctl(&["endpoint", "health"])
        });
        assert!(ready, "the private etcd did not come up");
        assert!(etcd.etcdctl(&[
            "user",
            "add",
            &format!("root:{SECRET}"),
            "--interactive=false"
        ]));
        assert!(etcd.etcdctl(&["auth", "enable"]));
        Some(etcd)
    }

    fn etcdctl(&self, args: &[&str]) -> bool {
        Command::new("etcdctl")
            .env("ETCDCTL_API", "3")
            .args(["--endpoints", &self.url])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success())
    }
}

impl Drop for PrivateEtcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Every log line of this thread, as text.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test(flavor = "current_thread")]
async fn passwords_never_shown() {
    let logs = Logs::default();
    let writer = logs.clone();
    let _guard = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_max_level(tracing::Level::TRACE)
            .with_ansi(false)
            .with_writer(move || writer.clone())
            .finish(),
    );
    let Some(etcd) = PrivateEtcd::start() else {
        return;
    };

    let wrong = EtcdLockProvider::builder(&etcd.url)
        .credentials("root", format!("wrong-{SECRET}"))
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(wrong, Error::Store { .. }), "{wrong:?}");
    assert_hidden("a wrong password", &format!("{wrong} {wrong:?}"));
    let unknown = EtcdElector::builder(&etcd.url)
        .credentials("nobody", SECRET)
        .connect()
        .await
        .unwrap_err();
    assert_hidden("an unknown user", &format!("{unknown} {unknown:?}"));
    let without = EtcdLockProvider::builder(&etcd.url).connect().await;
    assert!(without.is_err(), "auth is on: no token, no requests");

    let builder = EtcdLockProvider::builder(&etcd.url)
        .credentials("root", SECRET)
        .holder("h");
    assert_hidden("the builder", &format!("{builder:?}"));
    let provider = builder.connect().await.expect("the right password");
    assert_hidden("the provider", &format!("{provider:?}"));
    let config = LockConfiguration::new("auth", Duration::from_secs(30), Duration::ZERO).unwrap();
    let lease = provider.acquire(&config).await.unwrap().expect("acquired");
    assert!(provider.release(&lease).await.unwrap());
    assert_hidden("the elector", &format!("{:?}", provider.elector()));

    // The token expires; the next requests authenticate again by themselves.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let lease = provider
        .acquire(&config)
        .await
        .expect("a new token after the first expired")
        .expect("acquired");
    assert!(provider.release(&lease).await.unwrap());

    let logged = String::from_utf8_lossy(&logs.0.lock().unwrap()).into_owned();
    assert!(
        !logged.is_empty(),
        "no log captured: the check would prove nothing"
    );
    assert_hidden("the logs", &logged);
}
