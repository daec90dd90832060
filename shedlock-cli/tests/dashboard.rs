//! `shedlock dashboard` serves the page of the store it is given (SQLite, a temporary file; the
//! page itself is tested in `shedlock-dashboard`, in a browser too).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use shedlock_conformance::unique_table;
use shedlock_core::LockConfiguration;
use shedlock_runtime::LockingTaskExecutor;
use shedlock_sqlx::SqliteLockProvider;

/// Stops the server when the test ends, also when it fails.
struct Server(std::process::Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn shedlock() -> Command {
    let mut command = common::shedlock_command();
    command.env_remove("SHEDLOCK_DASHBOARD_TOKEN");
    command
}

#[tokio::test]
async fn serves_the_page_of_the_store_on_localhost() {
    let file = std::env::temp_dir().join(format!("{}.db", unique_table("cli_dashboard")));
    let url = format!("sqlite:{}", file.display());
    let provider = SqliteLockProvider::connect(&format!("{url}?mode=rwc"))
        .await
        .unwrap()
        .with_holder("web-1")
        .unwrap();
    provider.create_schema().await.unwrap();
    let config =
        LockConfiguration::new("nightly", Duration::from_secs(60), Duration::ZERO).unwrap();
    let _held = LockingTaskExecutor::new(provider.clone())
        .try_lock(&config)
        .await
        .unwrap()
        .unwrap();

    let mut server = Server(
        shedlock()
            .args(["--url", &url, "dashboard", "--listen", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // Its first line says where it listens, once it does.
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let address = line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_owned();
    assert!(
        address.starts_with("127.0.0.1:") && line.contains("read-only"),
        "{line}"
    );

    let mut stream = TcpStream::connect(&address).unwrap();
    stream
        .write_all(b"GET /?view=locks HTTP/1.0\r\nHost: localhost\r\n\r\n")
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    drop(server);
    assert!(response.starts_with("HTTP/1.0 200") || response.starts_with("HTTP/1.1 200"));
    assert!(
        response.contains(r#"<tr class="lock" data-name="nightly">"#),
        "{response}"
    );
    assert!(response.contains(r#"<td class="holder">web-1</td>"#));

    provider.pool().close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
}

#[test]
fn release_needs_a_token_from_the_environment() {
    // An empty file is an empty SQLite database: the store opens, the token is missing.
    let file = std::env::temp_dir().join(format!("{}.db", unique_table("cli_dashboard_token")));
    std::fs::write(&file, b"").unwrap();
    let output = shedlock()
        .args(["--url", &format!("sqlite:{}", file.display())])
        .args(["dashboard", "--allow-release"])
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&file);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("SHEDLOCK_DASHBOARD_TOKEN"), "{stderr}");
}
