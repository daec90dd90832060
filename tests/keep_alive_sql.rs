//! Keep-alive and the lost-lock signal against real databases (SQLite always; PostgreSQL and
//! MariaDB when their URLs are set).

mod common;

use std::time::Duration;

use common::Db;
use shedlock::{Error, LockConfiguration, LockContext, LockingTaskExecutor};
use shedlock_test_support::stores;

const LEASE: Duration = Duration::from_millis(1_000);
const INTERVAL: Duration = Duration::from_millis(300);

/// A job running three times its `lock_at_most_for` keeps the lock throughout: another instance
/// polling all along never gets it; right after the job it does (the scenario every store
/// passes).
async fn keep_alive_holds_the_lock(db: Db) {
    let Some(holder) = common::provider(db, "holder").await else {
        return;
    };
    let other =
        LockingTaskExecutor::from_shared(common::another_instance(&holder, "other").await.shared());
    let executor = LockingTaskExecutor::from_shared(holder.shared());
    let lock = LockConfiguration::new("long_job", LEASE, Duration::ZERO).unwrap();

    let store = format!("{db:?}");
    stores::keep_alive_holds_the_lock(&store, &executor, &other, &lock, INTERVAL).await;
    holder.remove_store().await;
}

/// The lease is taken over behind the holder's back: its lost-lock signal fires within one
/// extension interval, and its fenced write is rejected while the new holder's goes through.
async fn lost_lock_signal_and_fenced_write(db: Db) {
    let Some(holder) = common::provider(db, "holder").await else {
        return;
    };
    let thief_provider = common::another_instance(&holder, "thief").await;
    let thief = LockingTaskExecutor::from_shared(thief_provider.shared());
    let executor = LockingTaskExecutor::from_shared(holder.shared());
    let lock = LockConfiguration::new("stolen", Duration::from_secs(10), Duration::ZERO).unwrap();

    let outcome = executor.execute_with_keep_alive(&lock, INTERVAL, async {
        let ctx = LockContext::current().unwrap();
        holder
            .fenced_write("stolen", ctx.fencing_token())
            .await
            .expect("the live holder writes");
        let taken = holder.steal(&lock, &thief).await;
        let stolen_at = tokio::time::Instant::now();
        tokio::time::timeout(2 * INTERVAL + Duration::from_millis(500), ctx.cancelled())
            .await
            .unwrap_or_else(|_| panic!("{db:?}: lost-lock signal did not fire"));
        let signalled_after = stolen_at.elapsed();
        let stale = holder.fenced_write("stolen", ctx.fencing_token()).await;
        let fresh = thief_provider
            .fenced_write("stolen", taken.fencing_token())
            .await;
        (signalled_after, ctx.is_lost(), stale, fresh, taken)
    });
    let (signalled_after, lost, stale, fresh, taken) =
        outcome.await.unwrap().into_executed().unwrap();
    assert!(lost, "{db:?}");
    assert!(
        signalled_after <= INTERVAL + Duration::from_millis(500),
        "{db:?}: took {signalled_after:?}"
    );
    assert!(
        matches!(stale, Err(Error::LockLost { .. })),
        "{db:?}: stale write not rejected: {stale:?}"
    );
    assert!(
        fresh.is_ok(),
        "{db:?}: the new holder's write was rejected: {fresh:?}"
    );
    taken.release().await.unwrap();
    holder.remove_store().await;
}

sql_tests!(keep_alive_holds_the_lock, lost_lock_signal_and_fenced_write);
