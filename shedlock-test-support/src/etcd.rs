//! The members of the test etcd cluster (the three of `.ci/etcd.sh`), stopped and started
//! through the same script, with a guard that starts a stopped member again even when a test
//! fails.

use std::time::Duration;

use crate::ci_script::{CiScript, StoppedNode};

/// The test cluster: its endpoints and the directory `.ci/etcd.sh` runs it in.
#[derive(Debug, Clone)]
pub struct EtcdCluster {
    /// `SHEDLOCK_TEST_ETCD_URL`: the endpoints, comma-separated.
    pub url: String,
    script: CiScript,
}

impl EtcdCluster {
    /// The members' numbers.
    pub const MEMBERS: [u8; 3] = [1, 2, 3];

    /// The cluster of `SHEDLOCK_TEST_ETCD_URL` and `SHEDLOCK_TEST_ETCD_DIR`; `None` (after a
    /// `skipped:` line, or a failure on CI) without them.
    pub fn from_env() -> Option<EtcdCluster> {
        let (url, script) = CiScript::from_env(
            "etcd.sh",
            "SHEDLOCK_TEST_ETCD_URL",
            "SHEDLOCK_TEST_ETCD_DIR",
            "etcd cluster",
        )?;
        Some(EtcdCluster { url, script })
    }

    /// Stops `member` (SIGTERM, SIGKILL after 10 s) and waits until its process is gone. The
    /// guard starts it again when dropped, unless [`StoppedMember::start`] did.
    ///
    /// # Errors
    /// When the script fails.
    pub fn stop(&self, member: u8) -> anyhow::Result<StoppedMember> {
        self.script.stop("member", member).map(StoppedMember)
    }

    /// The members that answer a health check (which needs a quorum).
    pub async fn healthy(&self) -> Vec<u8> {
        let script = self.script.clone();
        let status = tokio::task::spawn_blocking(move || script.run(&["status"]))
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        Self::MEMBERS
            .into_iter()
            .filter(|member| {
                status.lines().any(|line| {
                    line.starts_with(&format!("member {member} ")) && line.ends_with("healthy")
                })
            })
            .collect()
    }

    /// Waits until all three members are healthy.
    ///
    /// # Errors
    /// When they are not within `timeout`.
    pub async fn wait_healthy(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let healthy = self.healthy().await;
            if healthy.len() == Self::MEMBERS.len() {
                return Ok(());
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "etcd members healthy after {timeout:?}: {healthy:?}"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// A member stopped by [`EtcdCluster::stop`]; started again on drop.
#[derive(Debug)]
pub struct StoppedMember(StoppedNode);

impl StoppedMember {
    /// Starts the member again (it rejoins with its data).
    ///
    /// # Errors
    /// When the script fails.
    pub fn start(self) -> anyhow::Result<()> {
        self.0.start()
    }
}
