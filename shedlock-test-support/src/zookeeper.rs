//! The servers of the test ZooKeeper ensemble (the three of `.ci/zookeeper.sh`), stopped and
//! started through the same script, with a guard that starts a stopped server again even when
//! a test fails.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::ci_script::{CiScript, StoppedNode};

/// A server's role, as its `srvr` command reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerMode {
    /// The ensemble's leader.
    Leader,
    /// A follower.
    Follower,
    /// Not serving (stopped, or without a quorum).
    Down,
}

/// The test ensemble of `.ci/zookeeper.sh`: servers 1..=3 on client ports 2181..=2183.
#[derive(Debug, Clone)]
pub struct Ensemble {
    /// The connect string (`SHEDLOCK_TEST_ZK_URL`).
    pub url: String,
    script: CiScript,
}

impl Ensemble {
    /// The servers of the three-server ensemble.
    pub const SERVERS: [u8; 3] = [1, 2, 3];

    /// The ensemble from `SHEDLOCK_TEST_ZK_URL` and `SHEDLOCK_TEST_ZK_DIR` (its directory, which
    /// `.ci/zookeeper.sh` exports), or `None` after a `skipped:` line.
    ///
    /// # Panics
    /// When either is missing and `CI=true`.
    pub fn from_env() -> Option<Ensemble> {
        let (url, script) = CiScript::from_env(
            "zookeeper.sh",
            "SHEDLOCK_TEST_ZK_URL",
            "SHEDLOCK_TEST_ZK_DIR",
            "ZooKeeper ensemble",
        )?;
        Some(Ensemble { url, script })
    }

    /// Stops `server` (SIGTERM, waits until it is gone). The guard starts it again when dropped.
    ///
    /// # Errors
    /// When the script fails.
    pub fn stop(&self, server: u8) -> anyhow::Result<StoppedServer> {
        self.script.stop("server", server).map(StoppedServer)
    }

    /// The role `server` reports now.
    pub async fn mode(&self, server: u8) -> ServerMode {
        let ask = async {
            let mut stream =
                tokio::net::TcpStream::connect(("127.0.0.1", 2180 + u16::from(server))).await?;
            stream.write_all(b"srvr").await?;
            let mut reply = String::new();
            stream.read_to_string(&mut reply).await?;
            Ok::<_, std::io::Error>(reply)
        };
        match tokio::time::timeout(Duration::from_secs(2), ask).await {
            Ok(Ok(reply)) if reply.contains("Mode: leader") => ServerMode::Leader,
            Ok(Ok(reply)) if reply.contains("Mode: follower") => ServerMode::Follower,
            _ => ServerMode::Down,
        }
    }

    /// The server that leads the ensemble now, if any.
    pub async fn leader(&self) -> Option<u8> {
        for server in Self::SERVERS {
            if self.mode(server).await == ServerMode::Leader {
                return Some(server);
            }
        }
        None
    }

    /// Waits until a leader and at least one follower serve, for at most `timeout`.
    ///
    /// # Errors
    /// When they do not in time.
    pub async fn wait_quorum(&self, timeout: Duration) -> anyhow::Result<()> {
        self.wait_modes(timeout, "no quorum", |modes| {
            modes.contains(&ServerMode::Leader) && modes.contains(&ServerMode::Follower)
        })
        .await
    }

    /// Waits until all three servers serve (after a stopped one was started again), for at
    /// most `timeout`.
    ///
    /// # Errors
    /// When they do not in time.
    pub async fn wait_serving(&self, timeout: Duration) -> anyhow::Result<()> {
        self.wait_modes(timeout, "the ensemble is not whole", |modes| {
            !modes.contains(&ServerMode::Down)
        })
        .await
    }

    /// Polls the servers' modes until `enough` accepts them; after `timeout`, the error says
    /// `failure` and shows them.
    async fn wait_modes(
        &self,
        timeout: Duration,
        failure: &str,
        enough: impl Fn(&[ServerMode]) -> bool,
    ) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let mut modes = Vec::new();
            for server in Self::SERVERS {
                modes.push(self.mode(server).await);
            }
            if enough(&modes) {
                return Ok(());
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "{failure} within {timeout:?}: {modes:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A server stopped by [`Ensemble::stop`]; started again by [`start`](Self::start) or on drop
/// (so that a failing test leaves the ensemble whole for the next).
#[derive(Debug)]
pub struct StoppedServer(StoppedNode);

impl StoppedServer {
    /// Starts the server again (it rejoins the ensemble on its own).
    ///
    /// # Errors
    /// When the script fails.
    pub fn start(self) -> anyhow::Result<()> {
        self.0.start()
    }
}
