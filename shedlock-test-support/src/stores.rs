//! What the store crates' own tests share beyond URLs and names: what their reset, restart
//! and failover tests assert of leases (a lease granted after the store lost or forgot a lock
//! carries a larger fencing token than any before it, and the stale lease can touch nothing),
//! the keep-alive scenario every store passes, a free port for a private server or a dead
//! endpoint, and [`tests_per_store!`](crate::tests_per_store) for scenarios written once and
//! run on each store.

use std::time::Duration;

use shedlock_core::{LockConfiguration, LockLease, LockProvider};
use shedlock_runtime::{LockContext, LockingTaskExecutor};

/// `later` carries a larger fencing token than `earlier`.
///
/// # Panics
/// When it does not.
#[track_caller]
pub fn assert_token_above(later: &LockLease, earlier: &LockLease) {
    assert!(
        later.fencing_token() > earlier.fencing_token(),
        "token {} after {}",
        later.fencing_token(),
        earlier.fencing_token()
    );
}

/// `provider` takes the lock of `config` after the store lost or forgot the `stale` lease (a
/// reset by hand, a flush, a restart, a failover): the lock is free, and the new lease's token
/// is above the stale one. The new lease.
///
/// # Panics
/// When the lock is held or the token is not above, or the store fails.
pub async fn take_over(
    provider: &dyn LockProvider,
    config: &LockConfiguration,
    stale: &LockLease,
) -> LockLease {
    let lease = acquire_free(provider, config, "the store forgot the stale lease").await;
    assert_token_above(&lease, stale);
    lease
}

/// `provider` acquires the lock of `config`, which must be free (`why` says why: "2 of 3
/// masters grant"): the lease.
///
/// # Panics
/// When the lock is held, or the store fails.
pub async fn acquire_free(
    provider: &dyn LockProvider,
    config: &LockConfiguration,
    why: &str,
) -> LockLease {
    provider
        .acquire(config)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("{why}: the lock was refused"))
}

/// The `stale` lease is dead: `provider` (its holder) can neither release nor extend it.
///
/// # Panics
/// When it can, or the store fails.
pub async fn assert_stale_lease_refused(provider: &dyn LockProvider, stale: &LockLease) {
    assert!(
        !provider.release(stale).await.unwrap(),
        "the stale lease released the lock"
    );
    let extended = provider
        .extend(stale, Duration::from_secs(60), Duration::ZERO)
        .await
        .unwrap();
    assert!(extended.is_none(), "the stale lease was extended");
}

/// Keep-alive on `store` (named in the messages): a job on `executor` running three times the
/// `lock_at_most_for` of `lock`, extended every `interval`, keeps the lock with its token, and
/// no lost-lock signal, while another instance (`other`) polls for it all along; right after
/// the job, `other` gets it.
///
/// # Panics
/// When the store does not behave so, or fails.
pub async fn keep_alive_holds_the_lock(
    store: &str,
    executor: &LockingTaskExecutor,
    other: &LockingTaskExecutor,
    lock: &LockConfiguration,
    interval: Duration,
) {
    let job = executor.execute_with_keep_alive(lock, interval, async {
        let ctx = LockContext::current().unwrap();
        let token = ctx.fencing_token();
        let deadline = tokio::time::Instant::now() + 3 * lock.lock_at_most_for();
        let mut polls = 0;
        while tokio::time::Instant::now() < deadline {
            assert!(
                other.try_lock(lock).await.unwrap().is_none(),
                "{store}: taken while kept alive"
            );
            assert!(
                !ctx.is_cancelled(),
                "{store}: lost-lock signal while kept alive"
            );
            assert_eq!(
                ctx.fencing_token(),
                token,
                "{store}: keep-alive re-acquired"
            );
            polls += 1;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        polls
    });
    let polls = job.await.unwrap().into_executed().expect("ran");
    assert!(polls >= 20, "{store}: only {polls} polls");
    let after = other.try_lock(lock).await.unwrap();
    let after = after.unwrap_or_else(|| panic!("{store}: not released after the job"));
    after.release().await.unwrap();
}

/// A port of 127.0.0.1 that nothing listens on (free when this returns): for a private server,
/// or an endpoint no server answers at.
///
/// # Panics
/// When no port can be bound.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free port")
        .port()
}

/// Each scenario, an `async fn` of the calling test file taking the store to run on, as one
/// `#[tokio::test]` (multi-threaded, two workers) per store:
///
/// ```ignore
/// shedlock_test_support::tests_per_store! {
///     election: redis_election(Store::Redis), redlock_election(Store::RedLock);
/// }
/// ```
#[macro_export]
macro_rules! tests_per_store {
    ($($scenario:ident: $($test:ident($store:expr)),+;)*) => {
        $($(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                $scenario($store).await;
            }
        )+)*
    };
}
