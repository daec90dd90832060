//! A fleet on etcd: every instance runs the same locked job, and one of them leads.
//!
//! Run with: `cargo run --example etcd_cluster -- http://127.0.0.1:2379,http://127.0.0.1:22379,http://127.0.0.1:32379`
//! (in three shells at once; the endpoints default to `$SHEDLOCK_TEST_ETCD_URL`, then the ones
//! above; `bash .ci/etcd.sh start` runs such a cluster). An optional second argument stops the
//! instance after that many seconds (default: run until ctrl-c).
//!
//! Every second each instance tries the job `tick` under a lock: one runs it, with the
//! revision of the transaction that granted its lease as fencing token, the others skip. The
//! instances also campaign in the election `batch`: the one whose key under
//! `shedlock/elections/batch/` is oldest leads. Stop the leader with ctrl-c: it revokes its
//! lease and another leads within milliseconds. Kill it (`kill -9`): etcd deletes its key when
//! the lease (here 3 s) runs out, then another leads. Stop one etcd member
//! (`bash .ci/etcd.sh stop-member 2`): work goes on; stop two: every instance reports store
//! errors and no instance leads, until a member is back.

use std::time::Duration;

use shedlock::{
    ElectionConfig, LeaderElection, LockConfiguration, LockingTaskExecutor, TaskResult,
    etcd::EtcdLockProvider,
};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter("warn,shedlock_core=info")
        .init();
    let mut args = std::env::args().skip(1);
    let endpoints = args
        .next()
        .or_else(|| std::env::var("SHEDLOCK_TEST_ETCD_URL").ok())
        .unwrap_or_else(|| {
            "http://127.0.0.1:2379,http://127.0.0.1:22379,http://127.0.0.1:32379".to_owned()
        });
    let run_for = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .map(Duration::from_secs);

    let provider = EtcdLockProvider::builder(&endpoints)
        .request_timeout(Duration::from_secs(2))
        .connect()
        .await?;
    let elector = provider.elector();
    println!(
        "instance {} on {endpoints}; candidates under {}",
        elector.holder(),
        elector.election_prefix("batch")
    );
    let election = LeaderElection::builder("batch", elector)
        .config(ElectionConfig {
            lease_duration: Duration::from_secs(3),
            renew_deadline: Duration::from_secs(2),
            retry_period: Duration::from_millis(500),
        })
        .on_elected(|term| println!("leading (term {term})"))
        .on_revoked(|| println!("no longer leading"))
        .start()?;

    let executor = LockingTaskExecutor::new(provider.clone());
    let config = LockConfiguration::new("tick", Duration::from_secs(10), Duration::ZERO)?;
    let work = async {
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        loop {
            ticks.tick().await;
            let ran = executor
                .execute(&config, async {
                    let token = shedlock::LockContext::current()
                        .map(|lock| lock.fencing_token())
                        .unwrap_or_default();
                    println!("tick: ran it (token {token})");
                })
                .await;
            match ran {
                Ok(TaskResult::Skipped) => println!("tick: another instance has it"),
                Ok(_) => {}
                Err(error) => println!("tick: {error}"),
            }
            // Asked at the moment of acting: false once the leadership's deadline passed.
            println!("leader: {}", election.is_leader());
        }
    };
    let deadline = async {
        match run_for {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        () = work => {}
        () = deadline => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    election.resign().await;
    println!("stopped");
    Ok(())
}
