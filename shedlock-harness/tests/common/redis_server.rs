//! Private `redis-server` processes for runs that kill and restart RedLock masters: in memory
//! only, on free loopback ports, killed when dropped.

use std::io::{Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` this test started.
#[derive(Debug)]
pub(crate) struct RedisServer {
    port: u16,
    child: Option<Child>,
}

impl RedisServer {
    /// Starts a server, or `None` after a `skipped:` line when `redis-server` is not installed
    /// (a failure under `CI=true`).
    pub(crate) fn start() -> Option<RedisServer> {
        if Command::new("redis-server")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_err()
        {
            assert!(
                std::env::var("CI").as_deref() != Ok("true"),
                "redis-server is not installed but CI=true"
            );
            let line = "skipped: redis-server not installed (apt-get install redis-server)\n";
            let _ = std::io::stderr().write_all(line.as_bytes());
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let mut server = RedisServer { port, child: None };
        server.restart();
        Some(server)
    }

    /// `redis://127.0.0.1:<port>`.
    pub(crate) fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Kills the server (SIGKILL): it loses every key.
    pub(crate) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same port, empty, and waits until it answers.
    pub(crate) fn restart(&mut self) {
        self.kill();
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
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
