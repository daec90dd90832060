//! Leader election with callbacks, resignation on ctrl-c, and fast handover.
//!
//! Run with: `cargo run --example leader_election -- postgres://root@127.0.0.1:5432/test`
//! in two or three shells (or with `sqlite:///tmp/election.db?mode=rwc` for SQLite).
//!
//! One instance is elected and says so; the others follow. Press ctrl-c in the leader's shell:
//! it releases its lease and, on PostgreSQL, another instance is elected within milliseconds
//! (the release statement sends `NOTIFY`, followers `LISTEN`). `kill -9` the leader instead and
//! another takes over after the lease expires (15 s). The term printed is the lease's fencing
//! token: it only ever grows.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use shedlock::{
    LeaderElection, LeaderState, LockProvider, sql::PgLockProvider, sql::SqliteLockProvider,
};

fn now() -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default();
    format!(
        "{:02}:{:02}.{:03}",
        millis / 60_000 % 60,
        millis / 1000 % 60,
        millis % 1000
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter("warn").init();
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("DATABASE_URL").ok())
        .unwrap_or_else(|| "postgres://root@127.0.0.1:5432/test".to_owned());
    let provider: Arc<dyn LockProvider> = if url.starts_with("sqlite:") {
        let provider = SqliteLockProvider::connect(&url).await?;
        provider.create_schema().await?;
        Arc::new(provider)
    } else {
        let provider = PgLockProvider::new(sqlx::PgPool::connect(&url).await?);
        provider.create_schema().await?;
        Arc::new(provider)
    };
    let me = provider.holder().to_owned();
    println!("[{}] {me}: candidate in election `coordinator`", now());

    let election = LeaderElection::builder("coordinator", provider)
        .on_elected(|term| println!("[{}] elected: this instance leads (term {term})", now()))
        .on_revoked(|| println!("[{}] revoked: this instance no longer leads", now()))
        .start()?;

    // Do leader work while leading; follow otherwise.
    let mut state = election.subscribe();
    let work = async {
        loop {
            if let LeaderState::Leader { term } = *state.borrow_and_update() {
                println!("[{}] leader work under term {term}", now());
            }
            tokio::select! {
                changed = state.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(std::time::Duration::from_secs(3)) => {}
            }
        }
    };
    tokio::select! {
        () = work => {}
        _ = tokio::signal::ctrl_c() => println!("[{}] ctrl-c: resigning", now()),
    }
    election.resign().await;
    println!("[{}] resigned", now());
    Ok(())
}
