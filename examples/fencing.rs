//! Fencing tokens: a former lock holder that was paused past its lease cannot write.
//!
//! Run with: `cargo run --example fencing`
//!
//! Two instances share one SQLite file (no set-up). Instance A takes the lock, then stalls (as
//! in a long GC-like pause or a stopped process) past its lease. Instance B takes the lock over
//! and writes. When A wakes up, it still believes it holds the lock; its write goes through the
//! provider's fencing guard, which checks inside A's own transaction that A's token is still the
//! live one, and is rejected. A's lost-lock signal has fired too.

use std::time::Duration;

use shedlock::{
    Error, LockConfiguration, LockContext, LockingTaskExecutor, sql::SqliteLockProvider,
};

/// Writes a row of the protected table, fenced by the writer's lock token.
async fn fenced_write(
    provider: &SqliteLockProvider,
    lock: &LockContext,
    who: &str,
) -> anyhow::Result<()> {
    let mut tx = provider.pool().begin_with("BEGIN IMMEDIATE").await?;
    // Fails with LockLost unless (name, token) is the live lease; holds SQLite's write lock
    // until commit, so nobody can take the lock over in between.
    provider
        .verify_lease(&mut tx, lock.name(), lock.fencing_token())
        .await?;
    sqlx::query("INSERT INTO ledger (writer, token) VALUES (?, ?)")
        .bind(who)
        .bind(lock.fencing_token() as i64)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let path = std::env::temp_dir().join(format!("shedlock-fencing-{}.db", std::process::id()));
    let provider =
        SqliteLockProvider::connect(&format!("sqlite://{}?mode=rwc", path.display())).await?;
    provider.create_schema().await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS ledger (writer TEXT NOT NULL, token INTEGER NOT NULL)")
        .execute(provider.pool())
        .await?;
    let a_provider = provider.with_holder("instance-a")?;
    let b_provider = provider.with_holder("instance-b")?;
    let a = LockingTaskExecutor::new(a_provider.clone());
    let b = LockingTaskExecutor::new(b_provider.clone());
    let lease = LockConfiguration::new("ledger", Duration::from_secs(1), Duration::ZERO)?;

    let instance_a = async {
        a.execute(&lease, async {
            let lock = LockContext::current()?;
            println!(
                "A: holds the lock, token {}; now stalls for 2 s (lease: 1 s)",
                lock.fencing_token()
            );
            tokio::time::sleep(Duration::from_secs(2)).await; // the pause: nothing runs in A
            println!("A: wakes up; lost-lock signal fired: {}", lock.is_lost());
            let write = fenced_write(&a_provider, &lock, "instance-a").await;
            println!(
                "A: fenced write -> {}",
                match &write {
                    Ok(()) => "accepted".to_owned(),
                    Err(e) => format!("rejected ({e})"),
                }
            );
            let lost = write.as_ref().err().and_then(|e| e.downcast_ref::<Error>());
            anyhow::ensure!(
                matches!(lost, Some(Error::LockLost { .. })),
                "a stale write was accepted"
            );
            Ok(())
        })
        .await
    };
    let instance_b = async {
        // B tries once the lease has expired on the database's clock.
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        b.execute(&lease, async {
            let lock = LockContext::current()?;
            println!("B: took the lock over, token {}", lock.fencing_token());
            fenced_write(&b_provider, &lock, "instance-b").await?;
            println!("B: fenced write -> accepted");
            Ok::<_, anyhow::Error>(())
        })
        .await
    };
    let (a_outcome, b_outcome) = tokio::join!(instance_a, instance_b);
    a_outcome?.into_executed().expect("A ran")?;
    b_outcome?.into_executed().expect("B ran")?;

    let rows: Vec<(String, i64)> = sqlx::query_as("SELECT writer, token FROM ledger")
        .fetch_all(provider.pool())
        .await?;
    println!("ledger: {rows:?}");
    anyhow::ensure!(
        rows == [("instance-b".to_owned(), 2)],
        "unexpected ledger content"
    );
    let _ = std::fs::remove_file(&path);
    Ok(())
}
