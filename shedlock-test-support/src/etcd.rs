//! The members of the test etcd cluster (the three of `.ci/etcd.sh`), stopped and started
//! through the same script, with a guard that starts a stopped member again even when a test
//! fails.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

/// The test cluster: its endpoints and the directory `.ci/etcd.sh` runs it in.
#[derive(Debug, Clone)]
pub struct EtcdCluster {
    /// `SHEDLOCK_TEST_ETCD_URL`: the endpoints, comma-separated.
    pub url: String,
    dir: String,
}

impl EtcdCluster {
    /// The members' numbers.
    pub const MEMBERS: [u8; 3] = [1, 2, 3];

    /// The cluster of `SHEDLOCK_TEST_ETCD_URL` and `SHEDLOCK_TEST_ETCD_DIR`; `None` (after a
    /// `skipped:` line, or a failure on CI) without them.
    pub fn from_env() -> Option<EtcdCluster> {
        let url = std::env::var("SHEDLOCK_TEST_ETCD_URL").unwrap_or_default();
        let dir = std::env::var("SHEDLOCK_TEST_ETCD_DIR").unwrap_or_default();
        if !url.is_empty() && !dir.is_empty() {
            return Some(EtcdCluster { url, dir });
        }
        crate::skip(
            "SHEDLOCK_TEST_ETCD_URL and SHEDLOCK_TEST_ETCD_DIR not set (set them to run the etcd \
             cluster tests: eval \"$(bash .ci/etcd.sh start)\")",
        );
        None
    }

    fn script() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.ci/etcd.sh")
    }

    fn run_script(&self, args: &[&str]) -> anyhow::Result<String> {
        let output = std::process::Command::new("bash")
            .arg(Self::script())
            .args(args)
            .env("SHEDLOCK_TEST_ETCD_DIR", &self.dir)
            .output()
            .context("run .ci/etcd.sh")?;
        anyhow::ensure!(
            output.status.success(),
            "etcd.sh {args:?}: {}",
            output.status
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Stops `member` (SIGTERM, SIGKILL after 10 s) and waits until its process is gone. The
    /// guard starts it again when dropped, unless [`StoppedMember::start`] did.
    ///
    /// # Errors
    /// When the script fails.
    pub fn stop(&self, member: u8) -> anyhow::Result<StoppedMember> {
        self.run_script(&["stop-member", &member.to_string()])?;
        Ok(StoppedMember {
            cluster: self.clone(),
            member,
            started: false,
        })
    }

    /// The members that answer a health check (which needs a quorum).
    pub async fn healthy(&self) -> Vec<u8> {
        let cluster = self.clone();
        let status = tokio::task::spawn_blocking(move || cluster.run_script(&["status"]))
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
pub struct StoppedMember {
    cluster: EtcdCluster,
    member: u8,
    started: bool,
}

impl StoppedMember {
    /// Starts the member again (it rejoins with its data).
    ///
    /// # Errors
    /// When the script fails.
    pub fn start(mut self) -> anyhow::Result<()> {
        self.started = true;
        self.cluster
            .run_script(&["start-member", &self.member.to_string()])
            .map(drop)
    }
}

impl Drop for StoppedMember {
    fn drop(&mut self) {
        if !self.started {
            let _ = self
                .cluster
                .run_script(&["start-member", &self.member.to_string()]);
        }
    }
}
