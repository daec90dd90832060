//! `shedlock-harness stress …` runs a stress test and prints its figures (`--help` lists the
//! options); `shedlock-harness worker …` and `zk-candidate …` are processes the harness spawns.

// The harness's worker futures nest every store's provider futures (the Redis provider's
// Sentinel and Cluster paths made them deeper): the compiler's default query depth of 128
// overflows on them.
#![recursion_limit = "256"]

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser as _;
use shedlock_harness::{
    Cli, Command, StressOptions, WorkerOptions, ZkCandidateOptions, run_candidate,
    run_etcd_candidate, run_stress, run_worker,
};

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    // Usage errors exit here, with clap's message and status 2.
    let command = Cli::parse().command;
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("cannot start the tokio runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match command {
            Command::Worker(args) => run_worker(WorkerOptions::from_args(*args)?)
                .await
                .map(|()| true),
            Command::Stress(args) => stress(StressOptions::from_args(args)?).await,
            Command::ZkCandidate(args) => run_candidate(ZkCandidateOptions::from_args(args))
                .await
                .map(|()| true),
            Command::EtcdCandidate(args) => {
                run_etcd_candidate(ZkCandidateOptions::from_args(args), false)
                    .await
                    .map(|()| true)
            }
            Command::EtcdLockCandidate(args) => {
                run_etcd_candidate(ZkCandidateOptions::from_args(args), true)
                    .await
                    .map(|()| true)
            }
        }
    });
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the stress test, prints the figures; false when a rule was broken.
async fn stress(options: StressOptions) -> anyhow::Result<bool> {
    let command: Vec<String> = std::env::args().collect();
    println!("shedlock-harness stress: {options}");
    let started = Instant::now();
    let exe = std::env::current_exe()?;
    let report = run_stress(&exe, &options).await?;
    println!("command                 {}", command.join(" "));
    println!("{report}");
    println!(
        "wall time               {:.1} s",
        started.elapsed().as_secs_f64()
    );
    println!(
        "RESULT                  {}",
        if report.passed() { "PASS" } else { "FAIL" }
    );
    Ok(report.passed())
}
