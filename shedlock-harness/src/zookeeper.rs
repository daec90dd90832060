//! ZooKeeper in the harness: a candidate process (`shedlock-harness zk-candidate …`) that
//! campaigns through `ZkElector` and acts as leader at a fixed cadence, and control of the test
//! ensemble's servers (the three of `.ci/zookeeper.sh`), with a guard that starts a stopped
//! server again even when a test fails.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use shedlock::{ElectionConfig, LeaderElection, LeaderState, ZkElector};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use crate::args::Args;
use crate::event::{Counters, Event, now_us};
use crate::worker::{emit, stop_requested};

/// A candidate's command line.
#[derive(Debug, Clone)]
pub struct ZkCandidateOptions {
    /// The ensemble's connect string.
    pub url: String,
    /// The root node of the run.
    pub root: String,
    /// The election.
    pub election: String,
    /// This candidate's name.
    pub holder: String,
    /// The election's timing (`lease_duration` is the session timeout).
    pub config: ElectionConfig,
    /// How often the candidate asks `is_leader()` and, if it leads, acts (prints `leader_work`).
    pub act_every: Duration,
}

impl ZkCandidateOptions {
    /// The command line (after `zk-candidate`) that [`from_args`](Self::from_args) reads.
    pub fn to_args(&self) -> Vec<String> {
        let ms = |d: Duration| d.as_millis().to_string();
        [
            ("url", self.url.clone()),
            ("root", self.root.clone()),
            ("election", self.election.clone()),
            ("holder", self.holder.clone()),
            ("lease-ms", ms(self.config.lease_duration)),
            ("renew-ms", ms(self.config.renew_deadline)),
            ("retry-ms", ms(self.config.retry_period)),
            ("act-ms", ms(self.act_every)),
        ]
        .into_iter()
        .flat_map(|(k, v)| [format!("--{k}"), v])
        .collect()
    }

    /// Reads what [`to_args`](Self::to_args) wrote.
    ///
    /// # Errors
    /// On a missing, unknown or invalid option.
    pub fn from_args(mut args: Args) -> anyhow::Result<Self> {
        let options = ZkCandidateOptions {
            url: args.required("url")?,
            root: args.required("root")?,
            election: args.required("election")?,
            holder: args.required("holder")?,
            config: ElectionConfig {
                lease_duration: args.millis("lease-ms", Duration::from_secs(3))?,
                renew_deadline: args.millis("renew-ms", Duration::from_secs(2))?,
                retry_period: args.millis("retry-ms", Duration::from_millis(500))?,
            },
            act_every: args.millis("act-ms", Duration::from_millis(50))?,
        };
        args.finish()?;
        Ok(options)
    }
}

/// Runs a candidate until its stdin closes or SIGTERM, then resigns.
///
/// # Errors
/// When the ensemble cannot be reached or the election does not start; a `fatal` line says why.
pub async fn run_candidate(options: ZkCandidateOptions) -> anyhow::Result<()> {
    let result = campaign(&options).await;
    if let Err(error) = &result {
        emit(&Event::Fatal {
            error: format!("{error:#}"),
        });
    }
    result
}

async fn campaign(options: &ZkCandidateOptions) -> anyhow::Result<()> {
    let elector = ZkElector::builder(options.url.as_str())
        .root(&options.root)
        .holder(&options.holder)
        .connect()
        .await
        .with_context(|| format!("cannot reach ZooKeeper at {}", options.url))?;
    let election = LeaderElection::builder(options.election.clone(), elector)
        .config(options.config)
        .on_elected(|term| emit(&Event::Leader { term, at: now_us() }))
        .on_revoked(|| emit(&Event::Follower { at: now_us() }))
        .start()?;
    emit(&Event::Ready {
        holder: options.holder.clone(),
        pid: std::process::id(),
    });
    // Master work: ask at the moment of acting, as a service should.
    let act = async {
        let mut cadence = tokio::time::interval(options.act_every);
        cadence.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            cadence.tick().await;
            let at = now_us();
            if let LeaderState::Leader { term } = election.state() {
                emit(&Event::LeaderWork { term, at });
            }
        }
    };
    tokio::select! {
        () = act => {}
        () = stop_requested() => {}
    }
    election.resign().await;
    emit(&Event::Summary(Counters::default()));
    Ok(())
}

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
    dir: String,
}

impl Ensemble {
    /// The servers of the three-server ensemble.
    pub const SERVERS: [u8; 3] = [1, 2, 3];

    /// The ensemble from `SHEDLOCK_TEST_ZK_URL` and `SHEDLOCK_TEST_ZK_DIR` (its directory, which
    /// `.ci/zookeeper.sh` exports), or `None` after a line saying the test is skipped.
    ///
    /// # Panics
    /// When either is missing and `CI=true`.
    pub fn from_env() -> Option<Ensemble> {
        let url = std::env::var("SHEDLOCK_TEST_ZK_URL").unwrap_or_default();
        let dir = std::env::var("SHEDLOCK_TEST_ZK_DIR").unwrap_or_default();
        if !url.is_empty() && !dir.is_empty() {
            return Some(Ensemble { url, dir });
        }
        let what = "SHEDLOCK_TEST_ZK_URL and SHEDLOCK_TEST_ZK_DIR (eval \"$(bash .ci/zookeeper.sh start)\")";
        if std::env::var("CI").as_deref() == Ok("true") {
            panic!("{what} must be set when CI=true: the ZooKeeper harness tests must run on CI");
        }
        let line = format!("skipped: set {what} to run the ZooKeeper harness tests\n");
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        None
    }

    fn script() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.ci/zookeeper.sh")
    }

    fn control(&self, command: &str, server: u8) -> anyhow::Result<()> {
        let status = std::process::Command::new("bash")
            .arg(Self::script())
            .args([command, &server.to_string()])
            .env("SHEDLOCK_TEST_ZK_DIR", &self.dir)
            .status()
            .context("run .ci/zookeeper.sh")?;
        anyhow::ensure!(
            status.success(),
            "zookeeper.sh {command} {server}: {status}"
        );
        Ok(())
    }

    /// Stops `server` (SIGTERM, waits until it is gone). The guard starts it again when dropped.
    ///
    /// # Errors
    /// When the script fails.
    pub fn stop(&self, server: u8) -> anyhow::Result<StoppedServer> {
        self.control("stop-server", server)?;
        Ok(StoppedServer {
            ensemble: self.clone(),
            server,
            started: false,
        })
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
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let mut modes = Vec::new();
            for server in Self::SERVERS {
                modes.push(self.mode(server).await);
            }
            if modes.contains(&ServerMode::Leader) && modes.contains(&ServerMode::Follower) {
                return Ok(());
            }
            anyhow::ensure!(
                tokio::time::Instant::now() < deadline,
                "no quorum within {timeout:?}: {modes:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// A server stopped by [`Ensemble::stop`]; started again by [`start`](Self::start) or on drop
/// (so that a failing test leaves the ensemble whole for the next).
#[derive(Debug)]
pub struct StoppedServer {
    ensemble: Ensemble,
    server: u8,
    started: bool,
}

impl StoppedServer {
    /// Starts the server again (it rejoins the ensemble on its own).
    ///
    /// # Errors
    /// When the script fails.
    pub fn start(mut self) -> anyhow::Result<()> {
        self.started = true;
        self.ensemble.control("start-server", self.server)
    }
}

impl Drop for StoppedServer {
    fn drop(&mut self) {
        if !self.started
            && let Err(error) = self.ensemble.control("start-server", self.server)
        {
            eprintln!(
                "could not start ZooKeeper server {} again: {error:#}",
                self.server
            );
        }
    }
}
