//! A database that goes away and comes back, seen through a proxy the test stops (every
//! connection cut, new ones refused, as when the server stops) and starts again on the same
//! port: lock operations never wait in sqlx's connect backoff, so the first one after the
//! return connects. PostgreSQL and MariaDB with their test URLs; skipped without them, failed
//! without them when `CI=true`.
//!
//! The pools have sqlx's defaults (`acquire_timeout` 30 s, so backoff pauses of up to 6 s), as
//! a service's pool would. Before the fix, each operation during the outage waited the whole
//! 30 s and failed with "pool timed out", and one asked shortly before the return ran up to
//! 6 s after it.

#![cfg(any(feature = "postgres", feature = "mysql"))]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use shedlock_conformance::{CutProxy, unique_table, upstream_of, url_at};
use shedlock_core::{Error, LockConfiguration, LockProvider};
use shedlock_sqlx::SqlLockProvider;
use shedlock_sqlx::dialect::Dialect;
use sqlx::pool::PoolOptions;
use sqlx::{AssertSqlSafe, Pool};

/// Stops `proxy` and returns once its port refuses connections.
async fn stop(proxy: CutProxy) -> SocketAddr {
    let addr = proxy.addr();
    drop(proxy);
    while tokio::net::TcpStream::connect(addr).await.is_ok() {
        tokio::task::yield_now().await;
    }
    addr
}

/// The error chain of `error`, one string.
fn chain(error: &Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// A pool with sqlx's defaults at `url`, counting the connections `after_connect` saw.
fn counted_pool<D: Dialect>(url: &str, max: u32) -> (Pool<D::Database>, Arc<AtomicUsize>) {
    let connects = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&connects);
    let pool = PoolOptions::<D::Database>::new()
        .max_connections(max)
        .after_connect(move |_, _| {
            counted.fetch_add(1, Ordering::SeqCst);
            Box::pin(async { Ok(()) })
        })
        .connect_lazy(url)
        .expect("a valid URL");
    (pool, connects)
}

async fn drop_tables<D: Dialect>(provider: &SqlLockProvider<D>)
where
    for<'c> &'c Pool<D::Database>: sqlx::Executor<'c, Database = D::Database>,
{
    for table in [provider.runs_table(), provider.table()] {
        let sql = format!("DROP TABLE IF EXISTS {table}");
        sqlx::raw_sql(AssertSqlSafe(sql))
            .execute(provider.pool())
            .await
            .expect("drop the test's table");
    }
}

/// The scenario: granted; the server goes away (operations fail at once, with its refusal,
/// without the password); it comes back (the next acquisition is granted, on a connection
/// opened with the pool's `after_connect`).
async fn back_at_once<D: Dialect>(url: &str)
where
    for<'c> &'c Pool<D::Database>: sqlx::Executor<'c, Database = D::Database>,
{
    let upstream = upstream_of(url).unwrap();
    let proxy = CutProxy::start(&upstream).await.unwrap();
    let (pool, connects) = counted_pool::<D>(&proxy.url_through(url).unwrap(), 10);
    let provider = SqlLockProvider::<D>::builder(pool)
        .table(unique_table("outage"))
        .build()
        .unwrap();
    provider.create_schema().await.unwrap();
    let config = LockConfiguration::new("outage", Duration::from_secs(30), Duration::ZERO).unwrap();
    let lease = provider.acquire(&config).await.unwrap().expect("granted");
    provider.release(&lease).await.unwrap();

    let addr = stop(proxy).await;
    // A provider whose URL has a password, on the same refusing port.
    let with_password = {
        let (scheme, rest) = url.split_once("://").unwrap();
        let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
        let url = url_at(&format!("{scheme}://shedlock:hunter2@{host}"), addr).unwrap();
        let (pool, _) = counted_pool::<D>(&url, 10);
        SqlLockProvider::<D>::new(pool)
    };
    for provider in [&provider, &with_password] {
        for _ in 0..3 {
            let error = provider.acquire(&config).await.unwrap_err();
            let text = chain(&error);
            // The server's own answer, not sqlx's "pool timed out" after `acquire_timeout`.
            assert!(
                matches!(error, Error::Store { .. }) && text.contains("refused"),
                "{text}"
            );
            assert!(!text.contains("hunter2"), "a password in an error: {text}");
        }
    }

    let _proxy = CutProxy::bind(addr, &upstream).await.unwrap();
    let connected = connects.load(Ordering::SeqCst);
    let lease = provider
        .acquire(&config)
        .await
        .expect("the first acquisition after the return succeeds")
        .expect("granted");
    assert!(
        connects.load(Ordering::SeqCst) > connected,
        "a new connection, opened with the pool's after_connect"
    );
    provider.release(&lease).await.unwrap();
    drop_tables(&provider).await;
}

/// Lock statements do not wait for a place in the service's pool: its only connection is held
/// (by a query of the service, or a query stuck in sqlx's backoff), and the lock is granted.
async fn outside_the_pools_places<D: Dialect>(url: &str)
where
    for<'c> &'c Pool<D::Database>: sqlx::Executor<'c, Database = D::Database>,
{
    let (pool, _) = counted_pool::<D>(url, 1);
    let pool = {
        // A short acquire timeout: a regression fails in 2 s instead of hanging for 30.
        let options = pool
            .options()
            .clone()
            .acquire_timeout(Duration::from_secs(2));
        options.connect_lazy_with((*pool.connect_options()).clone())
    };
    let provider = SqlLockProvider::<D>::builder(pool.clone())
        .table(unique_table("outage_places"))
        .build()
        .unwrap();
    provider.create_schema().await.unwrap();
    let held = pool.acquire().await.unwrap();
    let config = LockConfiguration::new("places", Duration::from_secs(30), Duration::ZERO).unwrap();
    let lease = provider
        .acquire(&config)
        .await
        .expect("no wait for the pool's place")
        .expect("granted");
    provider.release(&lease).await.unwrap();
    drop(held);
    drop_tables(&provider).await;
}

#[cfg(feature = "postgres")]
mod postgres {
    use shedlock_sqlx::dialect::Pg;
    use shedlock_test_support::pg_url;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn back_at_once() {
        let Some(url) = pg_url() else { return };
        super::back_at_once::<Pg>(&url).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn outside_the_pools_places() {
        let Some(url) = pg_url() else { return };
        super::outside_the_pools_places::<Pg>(&url).await;
    }
}

#[cfg(feature = "mysql")]
mod mysql {
    use shedlock_sqlx::dialect::MySql;
    use shedlock_test_support::mysql_url;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn back_at_once() {
        let Some(url) = mysql_url() else { return };
        super::back_at_once::<MySql>(&url).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn outside_the_pools_places() {
        let Some(url) = mysql_url() else { return };
        super::outside_the_pools_places::<MySql>(&url).await;
    }
}
