//! The ShedLock demo, done right, on PostgreSQL.
//!
//! Run with: `cargo run --example postgres_cluster -- postgres://root@127.0.0.1:5432/test`
//! (in three shells at once; the URL defaults to `$DATABASE_URL`, then the one above).
//!
//! - `import_orders` runs every 2 s on whichever instance takes the lock first: exactly one
//!   instance logs each tick.
//! - `dispatch` runs only on the elected leader: one instance logs it until you stop it. Press
//!   ctrl-c there (graceful: its lease is released and another instance leads within
//!   milliseconds) or `kill -9` it (another instance leads within about 15 s, the lease).
//! - Press Enter in any shell to print the lock table.

use std::time::Duration;

use shedlock::{
    JobRegistry, LockContext, LockInspector, LockProvider, LockQuery, Scheduler, SchedulerConfig,
    scheduled, scheduler_lock, sql::PgLockProvider,
};
use tokio::io::{AsyncBufReadExt, BufReader};

#[scheduled(cron = "*/2 * * * * *")]
#[scheduler_lock(
    name = "import_orders",
    lock_at_most_for = "30s",
    lock_at_least_for = "1s"
)]
async fn import_orders(lock: LockContext) {
    println!(
        "import_orders: running here (fencing token {})",
        lock.fencing_token()
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
}

#[scheduled(fixed_rate = "1s", leader = "dispatcher")]
async fn dispatch() {
    println!("dispatch: this instance is the leader");
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter("warn,shedlock_core=info")
        .init();
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("DATABASE_URL").ok())
        .unwrap_or_else(|| "postgres://root@127.0.0.1:5432/test".to_owned());
    let pool = sqlx::PgPool::connect(&url).await?;
    let provider = PgLockProvider::new(pool);
    provider.create_schema().await?;
    println!(
        "instance {} connected to {url}; press Enter to print the lock table",
        provider.holder()
    );

    let registry = JobRegistry::new(())
        .add(shedlock::job!(import_orders))
        .add(shedlock::job!(dispatch));
    let config = SchedulerConfig {
        shutdown_grace_period: Duration::from_secs(5),
        ..SchedulerConfig::default()
    };
    let scheduler = Scheduler::builder()
        .provider(provider.clone())
        .config(config)
        .registry(registry)
        .start()
        .await?;

    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    let report = loop {
        tokio::select! {
            report = scheduler.shutdown_on_signal() => break report,
            line = stdin.next_line() => match line? {
                Some(_) => print_locks(&provider).await?,
                None => break scheduler.shutdown_on_signal().await, // stdin closed: wait for a signal
            },
        }
    };
    println!("stopped: {report:?}");
    Ok(())
}

async fn print_locks(provider: &PgLockProvider) -> anyhow::Result<()> {
    println!(
        "{:<16} {:<8} {:<6} {:<40} lock_until",
        "name", "held", "token", "locked_by"
    );
    for row in provider.list_locks(&LockQuery::all()).await? {
        let until: chrono::DateTime<chrono::Utc> = row.lock_until.into();
        println!(
            "{:<16} {:<8} {:<6} {:<40} {}",
            row.name,
            row.held,
            row.fencing_token,
            row.holder,
            until.format("%H:%M:%S%.3f")
        );
    }
    Ok(())
}
