//! Certificates the TLS tests make with the `openssl` command: a CA, a server certificate it
//! signs for `localhost` and 127.0.0.1, and an unrelated CA a client must not accept.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The files, in `dir`.
#[derive(Debug)]
pub(crate) struct Certs {
    pub(crate) ca: PathBuf,
    pub(crate) other_ca: PathBuf,
    pub(crate) cert: PathBuf,
    pub(crate) key: PathBuf,
}

fn openssl(dir: &Path, args: &[&str]) {
    let output = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        output.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A self-signed CA `name` (`name.pem`, `name.key`).
fn ca(dir: &Path, name: &str) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-days",
            "2",
            "-subj",
            &format!("/CN={name}"),
            "-keyout",
            &format!("{name}.key"),
            "-out",
            &format!("{name}.pem"),
        ],
    );
}

impl Certs {
    /// Makes them in `dir`; `None` without the `openssl` command.
    pub(crate) fn make(dir: &Path) -> Option<Certs> {
        if Command::new("openssl").arg("version").output().is_err() {
            return None;
        }
        ca(dir, "ca");
        ca(dir, "other-ca");
        std::fs::write(
            dir.join("san.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
        )
        .unwrap();
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-subj",
                "/CN=localhost",
                "-keyout",
                "server.key",
                "-out",
                "server.csr",
            ],
        );
        openssl(
            dir,
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
                "san.ext",
                "-out",
                "server.pem",
            ],
        );
        Some(Certs {
            ca: dir.join("ca.pem"),
            other_ca: dir.join("other-ca.pem"),
            cert: dir.join("server.pem"),
            key: dir.join("server.key"),
        })
    }
}
