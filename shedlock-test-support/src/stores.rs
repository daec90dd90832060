//! What the store crates' own tests share beyond URLs and names: what their reset, restart
//! and failover tests assert of leases (a lease granted after the store lost or forgot a lock
//! carries a larger fencing token than any before it, and the stale lease can touch nothing),
//! and a free port for a private server or a dead endpoint.

use std::time::Duration;

use shedlock_core::{LockConfiguration, LockLease, LockProvider};

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
