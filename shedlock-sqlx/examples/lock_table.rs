//! The lock table up close: two instances, one SQLite file, fencing tokens and the guard.
//!
//! Run with: `cargo run -p shedlock-sqlx --features sqlite --example lock_table`
//!
//! Instance A takes a lock with a short lease and "pauses" past it; instance B takes the lock
//! over with a higher fencing token. A's late write is refused by the fencing guard, B's goes
//! through. The lock table is printed after each step.

use std::time::Duration;

use shedlock_core::{Error, LockConfiguration, LockInspector, LockProvider, LockQuery};
use shedlock_sqlx::SqliteLockProvider;

async fn print_table(provider: &SqliteLockProvider, step: &str) -> Result<(), Error> {
    println!("{step}");
    for row in provider.list_locks(&LockQuery::all()).await? {
        println!("    {row}");
    }
    Ok(())
}

/// Appends to the report table only if `token` is still the live lease of `report`.
async fn fenced_write(
    provider: &SqliteLockProvider,
    token: u64,
    line: &str,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut tx = provider.pool().begin_with("BEGIN IMMEDIATE").await?;
    provider.verify_lease(&mut tx, "report", token).await?;
    sqlx::query("INSERT INTO report (line) VALUES (?)")
        .bind(line)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let file = std::env::temp_dir().join(format!("shedlock-lock-table-{}.db", std::process::id()));
    let a = SqliteLockProvider::connect(&format!("sqlite://{}", file.display()))
        .await?
        .with_holder("instance-a")?;
    let b = a.with_holder("instance-b")?;
    a.create_schema().await?;
    sqlx::query("CREATE TABLE IF NOT EXISTS report (line TEXT)")
        .execute(a.pool())
        .await?;

    let lease_len = Duration::from_millis(500);
    let config = LockConfiguration::new("report", lease_len, Duration::ZERO)?;
    let lease_a = a.acquire(&config).await?.expect("the lock is free");
    print_table(&a, "A acquired:").await?;
    assert!(
        b.acquire(&config).await?.is_none(),
        "B must not get a held lock"
    );

    tokio::time::sleep(lease_len + Duration::from_millis(100)).await; // A stalls past its lease
    let lease_b = b.acquire(&config).await?.expect("A's lease expired");
    print_table(&a, "B took over after A's lease expired:").await?;

    match fenced_write(&a, lease_a.fencing_token(), "from A").await {
        Err(error) => println!("A's late write refused: {error}"),
        Ok(()) => panic!("a stale token wrote"),
    }
    fenced_write(&b, lease_b.fencing_token(), "from B").await?;
    assert!(!a.release(&lease_a).await?, "A cannot release B's lock");
    assert!(b.release(&lease_b).await?);
    print_table(&a, "B released:").await?;

    let lines: Vec<String> = sqlx::query_scalar("SELECT line FROM report")
        .fetch_all(a.pool())
        .await?;
    println!("report: {lines:?}");
    a.pool().close().await;
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{}{suffix}", file.display()));
    }
    Ok(())
}
