//! Opening the provider's own connections without waiting in sqlx's connect backoff.
//!
//! sqlx's pool answers a refused connection (and PostgreSQL's "starting up" `57P03` and "too
//! many connections" `53300`) by trying again, silently, after pauses that double from 10 ms
//! up to a fifth of `acquire_timeout` (6 s with the default 30 s), until `acquire_timeout`.
//! An acquisition asked while the database was down therefore slept in such a pause when the
//! database came back, and ran up to that long later (1.3 s on PostgreSQL, 5.3 s on MariaDB
//! in issue 33's measurement); and while it slept it held one of the pool's places, which
//! the service's own queries then waited for.
//!
//! [`open`] keeps what the pool gives (its connect options, read at each call, so a rotated
//! password applies, and its `after_connect`), but on a pool of its own, one place, made for
//! the call: a lock statement never waits for a place in the service's pool. Whatever does
//! not connect within [`PROBE_AFTER`] is checked by one direct attempt of its own: if the
//! server refuses, the operation fails at once with the server's own answer (`Connection
//! refused`, `the database system is starting up`), not after `acquire_timeout` with "pool
//! timed out"; if the server accepts, the pool's attempt, which may be sleeping in its
//! backoff, is replaced by a new one, which connects at once. A lost tick is thus answered
//! within a fraction of a second, and the first tick after the database is back connects on
//! its first attempt.

use std::pin::pin;
use std::time::Duration;

use sqlx::pool::{Pool, PoolConnection};
use sqlx::{ConnectOptions as _, Connection as _, Database};

/// How long the pool may take to open a connection before one direct attempt checks whether
/// the server refuses: well above a connection's set-up on a working network (a few ms on a
/// LAN, tens with TLS across a region), and well below sqlx's backoff of seconds.
pub(crate) const PROBE_AFTER: Duration = Duration::from_millis(150);

/// A new connection for lock statements, opened with `pool`'s options and `after_connect`,
/// outside its places. Fails at once with the server's answer when the server refuses
/// connections.
pub(crate) async fn open<DB: Database>(pool: &Pool<DB>) -> Result<DB::Connection, sqlx::Error> {
    #[cfg(feature = "postgres")]
    if let Some(servers) = crate::primary::servers_of(pool) {
        return on_the_primary(pool, &servers).await;
    }
    open_once(pool).await
}

/// [`open`] for a pool that follows the PostgreSQL primary (`connect_to_primary`): a connection
/// that may write, after pointing the pool at the primary found anew if need be.
#[cfg(feature = "postgres")]
async fn on_the_primary<DB: Database>(
    pool: &Pool<DB>,
    servers: &std::sync::Arc<crate::primary::Servers>,
) -> Result<DB::Connection, sqlx::Error> {
    use crate::primary::checked;
    let first = open_once(pool).await;
    if let Some(connection) = checked(pool, servers, first).await? {
        return Ok(connection);
    }
    // The pool now points at the server just found read-write.
    let second = open_once(pool).await?;
    checked(pool, servers, Ok(second)).await?.ok_or_else(|| {
        let message = "the PostgreSQL server found read-write turned read-only at once";
        sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            message,
        ))
    })
}

async fn open_once<DB: Database>(pool: &Pool<DB>) -> Result<DB::Connection, sqlx::Error> {
    let opener = opener(pool);
    let probed = {
        let mut pooled = pin!(opener.acquire());
        if let Ok(opened) = tokio::time::timeout(PROBE_AFTER, &mut pooled).await {
            return opened.map(PoolConnection::detach);
        }
        let connect_options = pool.connect_options();
        let probe = pin!(connect_options.connect());
        tokio::select! {
            opened = &mut pooled => return opened.map(PoolConnection::detach),
            probed = probe => probed?,
        }
    };
    // The server accepts connections again: the pool's attempt (dropped above) may have been
    // sleeping in its backoff; a new one connects at once.
    tokio::spawn(async move {
        let _ = probed.close().await;
    });
    tracing::debug!("the database accepts connections again");
    opener.acquire().await.map(PoolConnection::detach)
}

/// A pool with `pool`'s options (its `after_connect` included) and current connect options,
/// holding one place and nothing idle: each connection it opens is detached at once.
fn opener<DB: Database>(pool: &Pool<DB>) -> Pool<DB> {
    pool.options()
        .clone()
        .max_connections(1)
        .min_connections(0)
        .idle_timeout(None)
        .max_lifetime(None)
        .test_before_acquire(false)
        .connect_lazy_with((*pool.connect_options()).clone())
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use sqlx::Executor as _;
    use sqlx::sqlite::SqlitePoolOptions;

    use super::*;

    /// The pool's `after_connect` runs on the connections opened for lock statements, and they
    /// take none of the pool's places.
    #[tokio::test]
    async fn opens_with_the_pools_after_connect_outside_its_places() {
        let connects = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&connects);
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .after_connect(move |connection, _| {
                let counted = Arc::clone(&counted);
                Box::pin(async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    connection.execute("PRAGMA user_version = 7").await?;
                    Ok(())
                })
            })
            .connect_lazy("sqlite::memory:")
            .unwrap();
        let held = pool.acquire().await.unwrap(); // the pool's only place
        let mut opened = open(&pool).await.unwrap();
        let version: i64 = sqlx::query_scalar("PRAGMA user_version")
            .fetch_one(&mut opened)
            .await
            .unwrap();
        assert_eq!(version, 7);
        assert_eq!(connects.load(Ordering::SeqCst), 2);
        assert_eq!(pool.size(), 1);
        drop(held);
    }
}
