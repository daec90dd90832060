//! The locking executor without macros or a scheduler: run any future under a cluster lock.
//!
//! Run with: `cargo run --example manual_executor`
//!
//! Two "instances" share one in-memory store (in production: a SQL provider on a shared
//! database). Both try the same work at the same moment; one runs it, the other is told it was
//! skipped. The running one reads its fencing token and extends its lease mid-way.

use std::time::Duration;

use shedlock::{
    InMemoryLockProvider, LockConfiguration, LockContext, LockEvent, LockingTaskExecutor,
    TaskResult,
};

#[tokio::main]
async fn main() -> Result<(), shedlock::Error> {
    let store = InMemoryLockProvider::new();
    let log_events = |event: &LockEvent<'_>| println!("  event: {event}");
    let instance_a =
        LockingTaskExecutor::new(store.with_holder("instance-a")).with_listener(log_events);
    let instance_b = LockingTaskExecutor::new(store.with_holder("instance-b"));

    // Held for at most 30 s if this process dies; kept at least 1 s even if the work is faster.
    let lock = LockConfiguration::new(
        "import_orders",
        Duration::from_secs(30),
        Duration::from_secs(1),
    )?;

    let import = |who: &'static str| async move {
        let ctx = LockContext::current().expect("runs under the lock");
        println!(
            "{who}: importing with fencing token {}",
            ctx.fencing_token()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
        // Long job? Push the lease out before it ends.
        ctx.extend(Duration::from_secs(30), Duration::from_secs(1))
            .await?;
        tokio::time::sleep(Duration::from_millis(200)).await;
        Ok::<_, shedlock::Error>(42)
    };

    let (a, b) = tokio::join!(instance_a.execute(&lock, import("instance-a")), async {
        // Start a moment later, as a second instance whose trigger fires a little after.
        tokio::time::sleep(Duration::from_millis(50)).await;
        instance_b.execute(&lock, import("instance-b")).await
    },);
    for (who, outcome) in [("instance-a", a?), ("instance-b", b?)] {
        match outcome {
            TaskResult::Executed(result) => {
                println!("{who}: executed, imported {} orders", result?)
            }
            TaskResult::Skipped => println!("{who}: skipped, another instance holds the lock"),
        }
    }
    Ok(())
}
