//! ZooKeeper in the harness: a candidate process (`shedlock-harness zk-candidate …`) that
//! campaigns through `ZkElector` and acts as leader at a fixed cadence. The test ensemble's
//! servers are stopped and started with `shedlock_test_support::Ensemble`.

use std::time::Duration;

use anyhow::Context as _;
use shedlock::{
    ElectionConfig, LeaderElection, LeaderState, provider::Elector, zookeeper::ZkElector,
};

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
    pub fn from_args(args: ZkCandidateArgs) -> Self {
        ZkCandidateOptions {
            url: args.url,
            root: args.root,
            election: args.election,
            holder: args.holder,
            config: ElectionConfig {
                lease_duration: Duration::from_millis(args.lease_ms),
                renew_deadline: Duration::from_millis(args.renew_ms),
                retry_period: Duration::from_millis(args.retry_ms),
            },
            act_every: Duration::from_millis(args.act_ms),
        }
    }
}

/// The command line of `shedlock-harness zk-candidate`: what [`ZkCandidateOptions::to_args`]
/// writes.
#[derive(Debug, clap::Args)]
pub struct ZkCandidateArgs {
    /// The ensemble's connect string.
    #[arg(long)]
    url: String,
    /// The root node of the run.
    #[arg(long)]
    root: String,
    /// The election.
    #[arg(long)]
    election: String,
    /// This candidate's name.
    #[arg(long)]
    holder: String,
    /// The election's lease (the session timeout).
    #[arg(long, default_value_t = 3000)]
    lease_ms: u64,
    /// The renew deadline.
    #[arg(long, default_value_t = 2000)]
    renew_ms: u64,
    /// The retry period.
    #[arg(long, default_value_t = 500)]
    retry_ms: u64,
    /// How often the candidate asks whether it leads and, if so, acts.
    #[arg(long, default_value_t = 50)]
    act_ms: u64,
}

/// Runs a candidate until its stdin closes or SIGTERM, then resigns.
///
/// # Errors
/// When the ensemble cannot be reached or the election does not start; a `fatal` line says why.
pub async fn run_candidate(options: ZkCandidateOptions) -> anyhow::Result<()> {
    fatal_on_error(campaign(&options).await)
}

/// `result`, after a `fatal` line saying why when it is an error.
pub(crate) fn fatal_on_error(result: anyhow::Result<()>) -> anyhow::Result<()> {
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
    lead(options, elector).await
}

/// Campaigns through `elector` and acts as leader at the options' cadence until stopped, then
/// resigns (any store's candidate process).
pub(crate) async fn lead(
    options: &ZkCandidateOptions,
    elector: impl Elector,
) -> anyhow::Result<()> {
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
