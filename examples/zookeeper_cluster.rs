//! Master and slaves on ZooKeeper: the leader election recipe of "Implementing Leader Election
//! and automatic fail over", with its two callbacks, "go to master mode" and "go to slave mode".
//!
//! Run with: `cargo run --example zookeeper_cluster -- 127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183`
//! (in three shells at once; the connect string defaults to `$SHEDLOCK_TEST_ZK_URL`, then the
//! one above; `bash .ci/zookeeper.sh start` runs such an ensemble).
//!
//! Each instance creates an ephemeral sequential node under `/shedlock/elections/batch`; the
//! lowest is master and does the batch work, every other instance watches only the node just
//! below its own and does nothing. Stop the master: with ctrl-c it deletes its node and a slave
//! goes to master mode within milliseconds; with `kill -9` the ensemble deletes the node once
//! the session timeout (here 4 s) has passed, then a slave goes to master mode. A master cut off
//! from the ensemble goes to slave mode on its own before that can happen.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use shedlock::{ElectionConfig, LeaderElection, zookeeper::ZkElector};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter("warn,shedlock_core=info")
        .init();
    let connect_string = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("SHEDLOCK_TEST_ZK_URL").ok())
        .unwrap_or_else(|| "127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183".to_owned());
    let elector = ZkElector::connect(&connect_string).await?;
    println!(
        "instance {} joins the election under {}",
        elector.holder(),
        elector.election_path("batch")
    );

    // The seed's ClusterService: an AtomicBoolean flipped by the two callbacks.
    let master = Arc::new(AtomicBool::new(false));
    let (to_master, to_slave) = (Arc::clone(&master), Arc::clone(&master));
    let election = LeaderElection::builder("batch", elector)
        .config(ElectionConfig {
            lease_duration: Duration::from_secs(4), // the session timeout
            renew_deadline: Duration::from_millis(2500),
            retry_period: Duration::from_millis(500),
        })
        .on_elected(move |term| {
            println!("going to master mode (term {term})");
            to_master.store(true, Ordering::SeqCst);
        })
        .on_revoked(move || {
            println!("going to slave mode");
            to_slave.store(false, Ordering::SeqCst);
        })
        .start()?;

    let work = async {
        let mut ticks = tokio::time::interval(Duration::from_secs(1));
        loop {
            ticks.tick().await;
            // Asked at the moment of acting: false once the leadership's deadline passed, even
            // if this process was paused and no callback ran yet.
            if election.is_leader() {
                println!("doing some work …");
            } else {
                println!("doing nothing …");
            }
        }
    };
    tokio::select! {
        () = work => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    election.resign().await;
    println!("stopped (was master: {})", master.load(Ordering::SeqCst));
    Ok(())
}
