//! `shedlock-harness stress …` runs a stress test and prints its figures;
//! `shedlock-harness worker …` is one worker process, spawned by the harness itself.

use std::process::ExitCode;
use std::time::Instant;

use shedlock_harness::{
    Args, StressOptions, WorkerOptions, ZkCandidateOptions, run_candidate, run_stress, run_worker,
};

const USAGE: &str = "usage:
  shedlock-harness stress --db sqlite|postgres|mysql [--url URL] [--processes 3] [--locks 10]
                          [--seconds 8] [--tick 1] [--job-ms 600] [--lease-ms 3000]
                          [--at-least-ms 800] [--kill-every SECS] [--pause-every SECS]
                          [--max-connections 4]
  shedlock-harness worker …   (spawned by the harness)
  shedlock-harness zk-candidate …   (spawned by the harness)
The URL defaults to SHEDLOCK_TEST_PG_URL / SHEDLOCK_TEST_MYSQL_URL; SQLite uses a temp file.";

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let mut words = std::env::args().skip(1);
    let command = words.next();
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
        let args = Args::parse(words)?;
        match command.as_deref() {
            Some("worker") => run_worker(WorkerOptions::from_args(args)?)
                .await
                .map(|()| true),
            Some("stress") => stress(StressOptions::from_args(args)?).await,
            Some("zk-candidate") => run_candidate(ZkCandidateOptions::from_args(args)?)
                .await
                .map(|()| true),
            _ => anyhow::bail!("{USAGE}"),
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
