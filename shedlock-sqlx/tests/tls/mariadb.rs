//! MariaDB with TLS (`--ssl-cert`, `--ssl-key`) and a user that must connect over it
//! (`REQUIRE SSL`): a second `mariadbd` of the test's own beside the shared one, on a free port,
//! its data in a directory of its own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use shedlock_sqlx::MySqlLockProvider;

use super::certs::Certs;
use super::{PASSWORD, Scratch, assert_secret_kept, chown, grants, run};

/// A server of the test's own; shut down on drop.
struct MariaDbServer {
    dir: Scratch,
    port: u16,
    certs: Certs,
    child: Child,
}

const SERVER: &str = "/usr/sbin/mariadbd";
const INSTALL_DB: &str = "/usr/bin/mariadb-install-db";

impl MariaDbServer {
    fn socket(dir: &Path) -> PathBuf {
        dir.join("mysqld.sock")
    }

    /// `None` (the test is skipped) without Debian's MariaDB server or openssl.
    fn start() -> Option<MariaDbServer> {
        if !Path::new(SERVER).exists() || !Path::new(INSTALL_DB).exists() {
            shedlock_conformance::env::skip("no MariaDB server (/usr/sbin/mariadbd)");
            return None;
        }
        let dir = Scratch::new("mariadb", Some("mysql"));
        let Some(certs) = Certs::make(&dir.0) else {
            shedlock_conformance::env::skip("no openssl command to make certificates");
            return None;
        };
        let user: &[&str] = if super::is_root() {
            chown(&dir.0, "mysql");
            &["--user=mysql"]
        } else {
            &[]
        };
        let data = dir.0.join("data");
        let mut install = Command::new(INSTALL_DB);
        install
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(user)
            .args(["--auth-root-authentication-method=normal", "--skip-test-db"]);
        run(install);
        let port = shedlock_test_support::stores::free_port();
        let child = Command::new(SERVER)
            .arg("--no-defaults")
            .arg(format!("--datadir={}", data.display()))
            .args(user)
            .arg(format!("--port={port}"))
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--socket={}", Self::socket(&dir.0).display()))
            .arg(format!("--pid-file={}", dir.0.join("mysqld.pid").display()))
            .arg(format!("--log-error={}", dir.0.join("error.log").display()))
            .arg(format!("--ssl-cert={}", certs.cert.display()))
            .arg(format!("--ssl-key={}", certs.key.display()))
            .arg(format!("--ssl-ca={}", certs.ca.display()))
            .args(["--innodb-buffer-pool-size=16M", "--skip-log-bin"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let server = MariaDbServer {
            dir,
            port,
            certs,
            child,
        };
        // Ready when the root user gets in on the socket.
        let sql = format!(
            "CREATE USER 'shedlock'@'%' IDENTIFIED BY '{PASSWORD}' REQUIRE SSL; \
             GRANT ALL PRIVILEGES ON *.* TO 'shedlock'@'%'; CREATE DATABASE test"
        );
        for attempt in 0.. {
            let output = server.root().arg("-e").arg(&sql).output().unwrap();
            if output.status.success() {
                break;
            }
            assert!(
                attempt < 300,
                "MariaDB did not start: {}",
                String::from_utf8_lossy(&output.stderr)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(server)
    }

    fn root(&self) -> Command {
        let mut mysql = Command::new("mysql");
        mysql
            .arg(format!("--socket={}", Self::socket(&self.dir.0).display()))
            .args(["-u", "root"]);
        mysql
    }

    fn url(&self, host: &str, password: &str, query: &str) -> String {
        format!(
            "mysql://shedlock:{password}@{host}:{}/test?{query}",
            self.port
        )
    }
}

impl Drop for MariaDbServer {
    fn drop(&mut self) {
        let _ = Command::new("mysqladmin")
            .arg(format!("--socket={}", Self::socket(&self.dir.0).display()))
            .args(["-u", "root", "shutdown"])
            .output();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mariadb_over_tls() {
    let Some(server) = MariaDbServer::start() else {
        return;
    };
    let ca = server.certs.ca.display().to_string();

    // ssl-mode=REQUIRED: encrypted, the certificate not checked.
    let provider =
        MySqlLockProvider::connect(&server.url("127.0.0.1", PASSWORD, "ssl-mode=REQUIRED"))
            .await
            .unwrap();
    provider.create_schema().await.unwrap();
    grants(&provider).await;
    let (_, cipher): (String, String) = sqlx::query_as("SHOW SESSION STATUS LIKE 'Ssl_cipher'")
        .fetch_one(provider.pool())
        .await
        .unwrap();
    assert!(!cipher.is_empty(), "not encrypted");

    // VERIFY_IDENTITY: the certificate checked against the test's CA and the host name.
    let verified = server.url(
        "localhost",
        PASSWORD,
        &format!("ssl-mode=VERIFY_IDENTITY&ssl-ca={ca}"),
    );
    grants(&MySqlLockProvider::connect(&verified).await.unwrap()).await;

    // A certificate from another CA is refused; no error shows the password.
    let other_ca = server.url(
        "localhost",
        PASSWORD,
        &format!(
            "ssl-mode=VERIFY_IDENTITY&ssl-ca={}",
            server.certs.other_ca.display()
        ),
    );
    let error = MySqlLockProvider::connect(&other_ca).await.unwrap_err();
    assert_secret_kept(&error, &["certificate", "issuer", "tls"]);

    // The user must use TLS: without it the server refuses; a wrong password is not shown.
    let plain = server.url("127.0.0.1", PASSWORD, "ssl-mode=DISABLED");
    let error = MySqlLockProvider::connect(&plain).await.unwrap_err();
    assert_secret_kept(&error, &["access denied"]);
    let wrong = server.url(
        "127.0.0.1",
        &format!("{PASSWORD}-wrong"),
        "ssl-mode=REQUIRED",
    );
    let error = MySqlLockProvider::connect(&wrong).await.unwrap_err();
    assert_secret_kept(&error, &["access denied"]);
}
