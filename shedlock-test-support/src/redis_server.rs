//! Private `redis-server` processes for tests that kill, restart or password-protect a server:
//! in memory only, on a free loopback port, killed when dropped.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Whether `redis-server` can be started; `false` after a `skipped:` line (a failure when
/// `CI=true`).
pub fn redis_installed() -> bool {
    let installed = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok();
    if !installed {
        shedlock_conformance::env::skip(
            "redis-server not installed (apt-get install redis-server)",
        );
    }
    installed
}

/// A `redis-server` this test started.
#[derive(Debug)]
pub struct RedisServer {
    port: u16,
    args: Vec<String>,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server with `args` added to its command line (e.g. `--requirepass`), and waits
    /// until it answers; `None` after a `skipped:` line when `redis-server` is not installed.
    ///
    /// # Panics
    /// When `redis-server` is not installed and `CI=true`, or does not start.
    pub fn start(args: &[&str]) -> Option<RedisServer> {
        if !redis_installed() {
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut server = RedisServer {
            port,
            args: args.iter().map(|a| (*a).to_owned()).collect(),
            child: None,
        };
        server.restart();
        Some(server)
    }

    /// `redis://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server at once (SIGKILL): it loses every key.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty, with the same arguments, and waits
    /// until it answers.
    ///
    /// # Panics
    /// When it does not answer within 10 s.
    pub fn restart(&mut self) {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.answers() {
            assert!(
                Instant::now() < deadline,
                "redis-server on {} did not start",
                self.port
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether the server answers `PING` (any reply, so a password-protected one counts).
    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
        let mut reply = [0u8; 1];
        stream.write_all(b"PING\r\n").is_ok() && stream.read(&mut reply).is_ok_and(|n| n == 1)
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
    }
}
