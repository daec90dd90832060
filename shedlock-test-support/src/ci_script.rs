//! What the etcd cluster and the ZooKeeper ensemble share: a three-node test cluster that a
//! `.ci` script runs (`.ci/etcd.sh`, `.ci/zookeeper.sh`), found through the two variables its
//! `start` exports, its nodes stopped and started through the same script.

use std::path::PathBuf;

use anyhow::Context as _;

/// A `.ci` script and the directory of the cluster it runs.
#[derive(Debug, Clone)]
pub(crate) struct CiScript {
    /// The script's file name in `.ci/`.
    name: &'static str,
    /// The variable the script reads the cluster's directory from.
    dir_var: &'static str,
    dir: String,
}

impl CiScript {
    /// The URL in `url_var`, and the script `name` on the directory in `dir_var`; `None` (after
    /// a `skipped:` line naming the `what` tests, or a failure on CI) without both.
    pub(crate) fn from_env(
        name: &'static str,
        url_var: &str,
        dir_var: &'static str,
        what: &str,
    ) -> Option<(String, CiScript)> {
        let url = std::env::var(url_var).unwrap_or_default();
        let dir = std::env::var(dir_var).unwrap_or_default();
        if !url.is_empty() && !dir.is_empty() {
            return Some((url, CiScript { name, dir_var, dir }));
        }
        shedlock_conformance::env::skip(format_args!(
            "{url_var} and {dir_var} not set (set them to run the {what} tests: eval \
             \"$(bash .ci/{name} start)\")"
        ));
        None
    }

    /// Runs the script with `args` on the cluster's directory; its standard output.
    pub(crate) fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../.ci")
            .join(self.name);
        let output = std::process::Command::new("bash")
            .arg(script)
            .args(args)
            .env(self.dir_var, &self.dir)
            .output()
            .with_context(|| format!("run .ci/{}", self.name))?;
        anyhow::ensure!(
            output.status.success(),
            "{} {args:?}: {} {}",
            self.name,
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    /// Stops node `number` (`stop-<node> N`: SIGTERM, SIGKILL after 10 s, then waits until its
    /// process is gone). The guard starts it again (`start-<node> N`) when dropped, unless
    /// [`StoppedNode::start`] did.
    pub(crate) fn stop(&self, node: &'static str, number: u8) -> anyhow::Result<StoppedNode> {
        self.run(&[&format!("stop-{node}"), &number.to_string()])?;
        Ok(StoppedNode {
            script: self.clone(),
            node,
            number,
            started: false,
        })
    }
}

/// A node stopped by [`CiScript::stop`]; started again by [`start`](Self::start) or on drop (so
/// that a failing test leaves the cluster whole for the next).
#[derive(Debug)]
pub(crate) struct StoppedNode {
    script: CiScript,
    /// What the script calls a node (`member`, `server`).
    node: &'static str,
    number: u8,
    started: bool,
}

impl StoppedNode {
    /// Starts the node again (it rejoins with its data).
    pub(crate) fn start(mut self) -> anyhow::Result<()> {
        self.started = true;
        self.start_again()
    }

    fn start_again(&self) -> anyhow::Result<()> {
        let command = format!("start-{}", self.node);
        self.script
            .run(&[&command, &self.number.to_string()])
            .map(drop)
    }
}

impl Drop for StoppedNode {
    fn drop(&mut self) {
        if !self.started
            && let Err(error) = self.start_again()
        {
            eprintln!(
                "could not start {} {} again (.ci/{}): {error:#}",
                self.node, self.number, self.script.name
            );
        }
    }
}
