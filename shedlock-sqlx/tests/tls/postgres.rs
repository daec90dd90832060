//! PostgreSQL with `ssl = on` whose `pg_hba.conf` lets clients in over TLS only (password
//! authentication, SCRAM).

use std::path::PathBuf;

use shedlock_sqlx::PgLockProvider;

use super::certs::Certs;
use super::{PASSWORD, Scratch, as_user, assert_secret_kept, chown, grants, is_store_error, run};

/// A server of the test's own; stopped on drop.
struct PgServer {
    bin: PathBuf,
    dir: Scratch,
    port: u16,
    certs: Certs,
}

impl PgServer {
    /// `None` (the test is skipped) without Debian's server binaries or openssl.
    fn start() -> Option<PgServer> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()
            .and_then(|versions| versions.filter_map(Result::ok).map(|v| v.path()).max())
            .map(|version| version.join("bin"))
            .filter(|bin| bin.join("initdb").exists());
        let Some(bin) = bin else {
            shedlock_conformance::env::skip("no PostgreSQL server binaries in /usr/lib/postgresql");
            return None;
        };
        let dir = Scratch::new("pg", Some("postgres"));
        let Some(certs) = Certs::make(&dir.0) else {
            shedlock_conformance::env::skip("no openssl command to make certificates");
            return None;
        };
        if super::is_root() {
            chown(&dir.0, "postgres");
        }
        std::fs::set_permissions(
            &certs.key,
            std::os::unix::fs::PermissionsExt::from_mode(0o600),
        )
        .unwrap();
        let data = dir.0.join("data");
        let mut initdb = as_user("postgres", &bin.join("initdb"));
        initdb
            .arg("-D")
            .arg(&data)
            .args(["-U", "postgres", "--auth=trust", "--no-sync"]);
        run(initdb);
        let port = shedlock_test_support::stores::free_port();
        let conf = format!(
            "listen_addresses = '127.0.0.1'\nport = {port}\nunix_socket_directories = '{}'\n\
             ssl = on\nssl_cert_file = '{}'\nssl_key_file = '{}'\nfsync = off\n",
            dir.0.display(),
            certs.cert.display(),
            certs.key.display()
        );
        append(&data.join("postgresql.conf"), &conf);
        std::fs::write(
            data.join("pg_hba.conf"),
            "local all all trust\n\
             hostssl all all 127.0.0.1/32 scram-sha-256\n\
             hostnossl all all 127.0.0.1/32 reject\n",
        )
        .unwrap();
        let mut start = as_user("postgres", &bin.join("pg_ctl"));
        start
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.0.join("server.log"))
            .args(["-w", "start"]);
        run(start);
        let server = PgServer {
            bin,
            dir,
            port,
            certs,
        };
        let mut psql = as_user("postgres", &server.bin.join("psql"));
        psql.arg("-h")
            .arg(&server.dir.0)
            .args([
                "-p",
                &port.to_string(),
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-c",
            ])
            .arg(format!(
                "CREATE ROLE shedlock LOGIN SUPERUSER PASSWORD '{PASSWORD}'"
            ));
        run(psql);
        Some(server)
    }

    fn url(&self, host: &str, password: &str, query: &str) -> String {
        format!(
            "postgres://shedlock:{password}@{host}:{}/postgres?{query}",
            self.port
        )
    }
}

fn append(path: &std::path::Path, text: &str) {
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let mut stop = as_user("postgres", &self.bin.join("pg_ctl"));
        stop.arg("-D")
            .arg(self.dir.0.join("data"))
            .args(["-m", "immediate", "-w", "stop"]);
        let _ = stop.output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_over_tls() {
    let Some(server) = PgServer::start() else {
        return;
    };
    let ca = server.certs.ca.display().to_string();

    // sslmode=require: encrypted, the certificate not checked.
    let provider = PgLockProvider::connect(&server.url("127.0.0.1", PASSWORD, "sslmode=require"))
        .await
        .unwrap();
    provider.create_schema().await.unwrap();
    grants(&provider).await;
    let encrypted: bool =
        sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
            .fetch_one(provider.pool())
            .await
            .unwrap();
    assert!(encrypted);

    // verify-full: the certificate checked against the test's CA and the host name, also
    // through connect_to_primary (its URL reading keeps the TLS parameters).
    let verified = server.url(
        "localhost",
        PASSWORD,
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    grants(&PgLockProvider::connect(&verified).await.unwrap()).await;
    grants(&PgLockProvider::connect_to_primary(&verified).await.unwrap()).await;

    // A certificate from another CA is refused; no error shows the password.
    let other_ca = server.url(
        "localhost",
        PASSWORD,
        &format!(
            "sslmode=verify-full&sslrootcert={}",
            server.certs.other_ca.display()
        ),
    );
    let error = PgLockProvider::connect(&other_ca).await.unwrap_err();
    assert_secret_kept(&error, &["certificate", "issuer", "tls"]);
    let error = PgLockProvider::connect_to_primary(&other_ca)
        .await
        .unwrap_err();
    assert_secret_kept(&error, &["certificate", "issuer", "tls"]);

    // Without TLS the server lets nobody in; a wrong password is named as such, not shown.
    let plain = server.url("127.0.0.1", PASSWORD, "sslmode=disable");
    let error = PgLockProvider::connect(&plain).await.unwrap_err();
    assert_secret_kept(&error, &["pg_hba.conf", "encryption"]);
    let wrong = server.url("127.0.0.1", &format!("{PASSWORD}-wrong"), "sslmode=require");
    let error = PgLockProvider::connect(&wrong).await.unwrap_err();
    assert_secret_kept(&error, &["password authentication failed"]);

    // A provider whose server went away answers a store error without the password either.
    let lazy =
        sqlx::PgPool::connect_lazy(&server.url("127.0.0.1", PASSWORD, "sslmode=require")).unwrap();
    let provider = PgLockProvider::new(lazy);
    drop(server);
    let config = shedlock_core::LockConfiguration::new(
        "gone",
        std::time::Duration::from_secs(1),
        std::time::Duration::ZERO,
    )
    .unwrap();
    let error = shedlock_core::LockProvider::acquire(&provider, &config)
        .await
        .unwrap_err();
    assert!(is_store_error(&error));
    assert_secret_kept(&error, &["refused", "connect"]);
}
