//! Acquisitions batched while every connection is busy: each lock won once, per-row conditions
//! kept inside one statement, and a fraction of the statements.
//!
//! Each test makes the provider's connections busy for certain first: two acquires of a
//! `blocker` lock whose row another transaction has locked, so that they wait in the database.
//! Everything acquired meanwhile queues, and goes as one batch once the blocker commits. The
//! tests run on tokio's single-threaded runtime, so that spawned acquires reach the queue
//! before the test goes on.

use std::time::{Duration, SystemTime};

use shedlock_core::{LockConfiguration, LockInspector, LockLease, LockProvider, LockQuery, Tick};
use shedlock_sqlx::PgLockProvider;
use sqlx::{AssertSqlSafe, Executor, PgPool, Postgres, Transaction};
use tokio::task::JoinHandle;

use super::{pool, transaction_after, wait_for_lock_waits};
use crate::common::{lease_config, statements, unique_table};

type Acquiring = JoinHandle<Option<LockLease>>;

/// A provider with 2 connections of its own, on a new table.
async fn provider(base: &str) -> Option<(PgPool, PgLockProvider, String)> {
    provider_on(pool().await?, base).await
}

async fn provider_on(pool: PgPool, base: &str) -> Option<(PgPool, PgLockProvider, String)> {
    let table = unique_table(base);
    let provider = PgLockProvider::builder(pool.clone())
        .table(&table)
        .dedicated_connections(2)
        .build()
        .unwrap();
    provider.create_schema().await.unwrap();
    Some((pool, provider, table))
}

fn spawn_acquire(provider: &PgLockProvider, config: LockConfiguration) -> Acquiring {
    let provider = provider.clone();
    tokio::spawn(async move { provider.acquire(&config).await.unwrap() })
}

/// Both connections busy: two acquires of `blocker` waiting for its row, which the returned
/// transaction holds locked. Commit it to let them (and the batch queued behind) through.
async fn saturate(
    pool: &PgPool,
    provider: &PgLockProvider,
    table: &str,
    blocker: &str,
) -> (Transaction<'static, Postgres>, Vec<Acquiring>) {
    let config = lease_config(blocker, Duration::from_secs(60));
    let lease = provider.acquire(&config).await.unwrap().expect("free");
    assert!(provider.release(&lease).await.unwrap());
    let lock = format!("SELECT 1 FROM {table} WHERE name = $1 FOR UPDATE");
    let tx = transaction_after(pool, lock, blocker).await;
    let waiting = (0..2)
        .map(|_| spawn_acquire(provider, config.clone()))
        .collect();
    wait_for_lock_waits(pool, table, 2).await;
    (tx, waiting)
}

/// Runs `configs` while the connections are busy: their outcomes in order, and the statements
/// sent on `table` meanwhile (the two blocker acquires included).
async fn acquire_batched(
    pool: &PgPool,
    provider: &PgLockProvider,
    table: &str,
    blocker: &str,
    configs: Vec<LockConfiguration>,
) -> (Vec<Option<LockLease>>, usize) {
    statements::record();
    let (tx, blocked) = saturate(pool, provider, table, blocker).await;
    let before = statements::executed_on(table);
    let acquiring: Vec<Acquiring> = configs
        .into_iter()
        .map(|config| spawn_acquire(provider, config))
        .collect();
    reach_the_queue().await;
    tx.commit().await.unwrap();
    let mut outcomes = Vec::new();
    for acquiring in acquiring {
        outcomes.push(acquiring.await.unwrap());
    }
    for blocked in blocked {
        blocked.await.unwrap();
    }
    (outcomes, statements::executed_on(table) - before)
}

/// Lets the tasks spawned so far run until they wait: on the tests' single-threaded runtime,
/// a spawned acquire that finds the connections busy queues in its first poll.
async fn reach_the_queue() {
    for _ in 0..3 {
        tokio::task::yield_now().await;
    }
}

async fn drop_table(pool: &PgPool, table: &str) {
    pool.execute(AssertSqlSafe(format!("DROP TABLE {table}")))
        .await
        .unwrap();
}

/// 500 acquires of distinct locks behind 2 busy connections: each won exactly once, in a
/// handful of statements; the same 500 again all lose.
#[tokio::test]
async fn five_hundred_acquires_in_a_few_statements() {
    let Some((pool, provider, table)) = provider("shedlock_batch500").await else {
        return;
    };
    let configs: Vec<_> = (0..500)
        .map(|i| lease_config(&format!("job{i}"), Duration::from_secs(60)))
        .collect();
    let (first, statements) =
        acquire_batched(&pool, &provider, &table, "blocker1", configs.clone()).await;
    for (config, lease) in configs.iter().zip(&first) {
        let lease = lease.as_ref().expect("each lock won once");
        assert_eq!(lease.name(), config.name());
        assert!(lease.fencing_token() > 0);
    }
    assert!(statements <= 10, "{statements} statements for 500 acquires");

    let (second, statements) = acquire_batched(&pool, &provider, &table, "blocker2", configs).await;
    assert!(
        second.iter().all(Option::is_none),
        "a held lock was won again"
    );
    assert!(statements <= 10, "{statements} statements for 500 acquires");
    let rows = provider.list_locks(&LockQuery::all()).await.unwrap();
    let jobs = rows.iter().filter(|row| row.name.starts_with("job"));
    let tokens: std::collections::HashMap<&str, u64> = first
        .iter()
        .flatten()
        .map(|lease| (lease.name(), lease.fencing_token()))
        .collect();
    assert!(
        jobs.clone()
            .all(|row| row.held && tokens.get(row.name.as_str()) == Some(&row.fencing_token)),
        "the second round changed a held row"
    );
    assert_eq!(jobs.count(), 500);
    drop_table(&pool, &table).await;
}

/// The same lock asked for three times in one queue: won once, the others lose, and it is not
/// sent twice in one statement (which PostgreSQL would refuse).
#[tokio::test]
async fn a_repeated_name_is_won_once() {
    let Some((pool, provider, table)) = provider("shedlock_batchdup").await else {
        return;
    };
    let dup = lease_config("dup", Duration::from_secs(60));
    let other = lease_config("other", Duration::from_secs(60));
    let configs = vec![dup.clone(), other, dup.clone(), dup];
    let (outcomes, _) = acquire_batched(&pool, &provider, &table, "blocker", configs).await;
    assert!(outcomes[1].is_some());
    let dups: Vec<_> = [&outcomes[0], &outcomes[2], &outcomes[3]]
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(dups.len(), 1, "won {} times", dups.len());
    assert!(dups[0].fencing_token() > 0);
    drop_table(&pool, &table).await;
}

/// One statement, each row with its own conditions: a missing lock is created; a lease whose
/// holder crashed and expired is taken over (token + 1); a live lease is refused; a lock
/// acquired within its window is refused, one acquired before it is taken.
#[tokio::test]
async fn each_row_keeps_its_own_conditions() {
    let Some((pool, provider, table)) = provider("shedlock_batchrows").await else {
        return;
    };
    let long = Duration::from_secs(60);
    let crashed = provider.with_holder("crashed").unwrap();
    let live = provider.with_holder("live").unwrap();
    let mut crashed_tokens = std::collections::HashMap::new();
    for name in ["expired", "recent", "old"] {
        let lease = crashed.acquire(&lease_config(name, long)).await.unwrap();
        crashed_tokens.insert(name, lease.expect("free").fencing_token());
    }
    live.acquire(&lease_config("held", long))
        .await
        .unwrap()
        .unwrap();
    // `expired`: the crashed holder's lease ran out; `old`: acquired two hours ago and
    // released; `recent`: acquired just now and released.
    pool.execute(AssertSqlSafe(format!(
        "UPDATE {table} SET lock_until = timezone('utc', clock_timestamp()) - INTERVAL '1 second' \
         WHERE name IN ('expired', 'recent'); \
         UPDATE {table} SET locked_at = locked_at - INTERVAL '2 hours', \
         lock_until = locked_at - INTERVAL '2 hours' WHERE name = 'old'"
    )))
    .await
    .unwrap();
    let hour = Duration::from_secs(3600);
    let configs = vec![
        lease_config("missing", long),
        lease_config("expired", long),
        lease_config("held", long),
        lease_config("recent", long).unless_acquired_within(hour),
        lease_config("old", long).unless_acquired_within(hour),
    ];
    let (outcomes, statements) =
        acquire_batched(&pool, &provider, &table, "blocker", configs).await;
    let tokens: Vec<Option<u64>> = outcomes
        .iter()
        .map(|lease| lease.as_ref().map(LockLease::fencing_token))
        .collect();
    let taken_over = |t: Option<u64>, name| t.is_some_and(|token| token > crashed_tokens[name]);
    assert!(
        tokens[0].is_some() && taken_over(tokens[1], "expired") && taken_over(tokens[4], "old"),
        "{tokens:?}"
    );
    assert_eq!(
        (tokens[2], tokens[3]),
        (None, None),
        "held and recent refused"
    );
    assert_eq!(statements, 3, "the two blocker acquires and one batch");
    let expired = provider.lock_record("expired").await.unwrap().unwrap();
    assert_eq!(expired.holder, provider.holder());
    assert!(expired.held);
    drop_table(&pool, &table).await;
}

/// One batch, each row with its own tick: a new lock takes its tick; a free lock whose last
/// tick is this one is refused, one whose last tick lies a spacing back takes it; a tick too
/// far ahead inserts nothing; an acquisition without a tick leaves the last tick alone.
#[tokio::test]
async fn each_row_keeps_its_own_tick() {
    let Some((pool, provider, table)) = provider("shedlock_batchticks").await else {
        return;
    };
    let long = Duration::from_secs(60);
    let now = SystemTime::now();
    let tick = Tick::new(now);
    let earlier = Tick::new(now - Duration::from_secs(10));
    for (name, last) in [("spent", tick), ("spaced", earlier), ("untouched", tick)] {
        let config = lease_config(name, long).for_tick(last);
        let lease = provider.acquire(&config).await.unwrap().expect("free");
        assert!(provider.release(&lease).await.unwrap());
    }
    let year = Duration::from_secs(365 * 24 * 3600);
    let far = Tick::new(now + year).ahead_at_most(Duration::from_secs(3600));
    let configs = vec![
        lease_config("new", long).for_tick(tick),
        lease_config("spent", long).for_tick(tick),
        lease_config("spaced", long).for_tick(tick.with_spacing(Duration::from_secs(10))),
        lease_config("ahead", long).for_tick(far),
        lease_config("untouched", long),
    ];
    let (outcomes, statements) =
        acquire_batched(&pool, &provider, &table, "blocker", configs).await;
    let granted: Vec<bool> = outcomes.iter().map(Option::is_some).collect();
    assert_eq!(granted, [true, false, true, false, true]);
    assert_eq!(statements, 3, "the two blocker acquires and one batch");
    let last_ticks: Vec<(String, Option<i64>)> = sqlx::query_as(AssertSqlSafe(format!(
        "SELECT name, last_tick FROM {table} WHERE name <> 'blocker' ORDER BY name"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    let t = Some(tick.millis());
    let expected = [("new", t), ("spaced", t), ("spent", t), ("untouched", t)];
    let expected: Vec<(String, Option<i64>)> = expected
        .into_iter()
        .map(|(name, last)| (name.to_owned(), last))
        .collect();
    assert_eq!(last_ticks, expected);
    drop_table(&pool, &table).await;
}

/// An acquire whose caller went away while it was queued is not sent, and the others in its
/// batch are answered.
#[tokio::test]
async fn a_cancelled_waiter_does_not_break_the_batch() {
    let Some((pool, provider, table)) = provider("shedlock_batchcancel").await else {
        return;
    };
    statements::record();
    let (tx, blocked) = saturate(&pool, &provider, &table, "blocker").await;
    let long = Duration::from_secs(60);
    let kept = spawn_acquire(&provider, lease_config("kept", long));
    let cancelled = spawn_acquire(&provider, lease_config("cancelled", long));
    reach_the_queue().await;
    cancelled.abort();
    assert!(cancelled.await.unwrap_err().is_cancelled());
    tx.commit().await.unwrap();
    assert!(kept.await.unwrap().is_some());
    for blocked in blocked {
        blocked.await.unwrap();
    }
    let state = provider.lock_record("cancelled").await.unwrap();
    assert!(state.as_ref().is_none_or(|row| !row.held), "{state:?}");
    drop_table(&pool, &table).await;
}

/// At `SERIALIZABLE`, a batch whose statement waited behind a concurrent update of one of its
/// rows fails with 40001 once that update commits; the whole batch is sent again, and every
/// waiter gets its lock.
#[tokio::test]
async fn a_serialization_failure_retries_the_whole_batch() {
    let Some(pool) = super::serializable::pool().await else {
        return;
    };
    let (pool, provider, table) = provider_on(pool, "shedlock_batchretry").await.unwrap();
    let long = Duration::from_secs(60);
    let conflict = lease_config("conflict", long);
    let first = provider.acquire(&conflict).await.unwrap().expect("free");
    assert!(provider.release(&first).await.unwrap());
    let (blocker, blocked) = saturate(&pool, &provider, &table, "blocker").await;
    let acquiring = [
        spawn_acquire(&provider, conflict),
        spawn_acquire(&provider, lease_config("fresh", long)),
    ];
    reach_the_queue().await;
    let other = super::hold_row(&pool, &table, "conflict").await;
    blocker.commit().await.unwrap();
    for blocked in blocked {
        blocked.await.unwrap();
    }
    // The batch now waits for the `conflict` row; it fails when `other` commits.
    wait_for_lock_waits(&pool, &table, 1).await;
    other.commit().await.unwrap();
    let [conflict, fresh] = acquiring;
    let conflict = conflict
        .await
        .unwrap()
        .expect("retried, and the lock was free");
    assert!(conflict.fencing_token() > first.fencing_token());
    assert!(fresh.await.unwrap().expect("free").fencing_token() > 0);
    drop_table(&pool, &table).await;
}
