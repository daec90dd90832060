//! TLS to PostgreSQL and MariaDB, against servers of the test's own that take only TLS
//! connections, with certificates the test makes (`openssl`): `sslmode=require` and
//! `verify-full` (PostgreSQL), `ssl-mode=REQUIRED` and `VERIFY_IDENTITY` (MariaDB) work through
//! the provider; a certificate from another CA is refused; no error shows the password. Needs
//! the servers' binaries (Debian's `postgresql` and `mariadb-server`, as `.ci/services.sh`
//! installs) and openssl; skipped without them, failed without them when `CI=true`.

#![cfg(any(feature = "postgres", feature = "mysql"))]

#[path = "tls/certs.rs"]
mod certs;
#[cfg(feature = "mysql")]
#[path = "tls/mariadb.rs"]
mod mariadb;
#[cfg(feature = "postgres")]
#[path = "tls/postgres.rs"]
mod postgres;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use shedlock_core::{Error, LockConfiguration, LockProvider};

/// The password of the tests' database users: no error may show it.
const PASSWORD: &str = "hunter2-tls";

/// A directory of its own under the temp directory, readable by the server's user (postgres,
/// mysql) when this runs as root; removed on drop.
#[derive(Debug)]
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str, owner: Option<&str>) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "shedlock-tls-{name}-{}-{}",
            std::process::id(),
            shedlock_conformance::unique_table("d")
        ));
        std::fs::create_dir_all(&dir).unwrap();
        if let Some(owner) = owner.filter(|_| is_root()) {
            chown(&dir, owner);
        }
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

fn chown(path: &Path, owner: &str) {
    let status = Command::new("chown")
        .args(["-R", &format!("{owner}:"), &path.to_string_lossy()])
        .status()
        .unwrap();
    assert!(status.success(), "chown {owner} {}", path.display());
}

/// `program args…` as `user` when this is root (the servers refuse to run as root).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))] // PostgreSQL's only
fn as_user(user: &str, program: &Path) -> Command {
    if is_root() {
        let mut command = Command::new("runuser");
        command.args(["-u", user, "--"]).arg(program);
        command
    } else {
        Command::new(program)
    }
}

fn run(mut command: Command) {
    let output = command.output().expect("run a server command");
    assert!(
        output.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The error chain, one string.
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

/// The provider works: a lock is granted and released.
async fn grants(provider: &dyn LockProvider) {
    let config = LockConfiguration::new("tls", Duration::from_secs(5), Duration::ZERO).unwrap();
    let lease = provider
        .acquire(&config)
        .await
        .unwrap()
        .expect("granted over TLS");
    provider.release(&lease).await.unwrap();
}

/// An error that says what is wrong without showing the password.
fn assert_secret_kept(error: &dyn std::error::Error, expected: &[&str]) {
    let text = chain(error);
    assert!(!text.contains(PASSWORD), "the password in an error: {text}");
    assert!(
        expected.iter().any(|e| text.to_lowercase().contains(e)),
        "expected one of {expected:?} in: {text}"
    );
}

/// Whether an acquisition's error is a store error (what the provider's callers see).
#[cfg_attr(not(feature = "postgres"), allow(dead_code))] // PostgreSQL's only
fn is_store_error(error: &Error) -> bool {
    matches!(error, Error::Store { .. })
}
