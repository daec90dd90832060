//! Connections a provider keeps for its lock statements, outside the pool
//! (`dedicated_connections`, PostgreSQL and MySQL).
//!
//! sqlx's pool pings every connection returned to it (a round trip, in a spawned task) and, by
//! default, every connection it hands out: on a lock statement of one round trip, that doubles
//! or triples the round trips and the client's CPU time. A connection kept by the provider and
//! reused needs neither ping.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use sqlx::pool::PoolConnection;
use sqlx::{Connection, Database, Pool};

/// A dedicated connection idle for longer than this is pinged before use, since the server or
/// the network may have dropped it meanwhile.
const PING_AFTER_IDLE: Duration = Duration::from_secs(30);

/// Up to `capacity` connections taken out of the pool (detached, so the pool may open others)
/// and reused for lock statements. When all are busy, a statement uses the pool as usual.
pub(crate) struct DedicatedConnections<DB: Database> {
    capacity: usize,
    idle: Mutex<Vec<(DB::Connection, Instant)>>,
    /// Dedicated connections in existence: idle, in use, or being opened.
    open: AtomicUsize,
}

impl<DB: Database> DedicatedConnections<DB> {
    pub(crate) fn new(capacity: usize) -> Self {
        DedicatedConnections {
            capacity,
            idle: Mutex::new(Vec::new()),
            open: AtomicUsize::new(0),
        }
    }

    fn take_idle(&self) -> Vec<(DB::Connection, Instant)> {
        std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A connection for one operation: an idle dedicated one, a new dedicated one while fewer
    /// than `capacity` exist, else one from the pool. Never waits for a dedicated connection.
    pub(crate) async fn get(&self, pool: &Pool<DB>) -> Result<LockConnection<'_, DB>, sqlx::Error> {
        if self.capacity == 0 {
            return pool.acquire().await.map(|c| self.lend(Lent::Pooled(c)));
        }
        if pool.is_closed() {
            // Closing the pool ends the dedicated connections too.
            for (connection, _) in self.take_idle() {
                self.open.fetch_sub(1, Ordering::Relaxed);
                let _ = connection.close().await;
            }
            return pool.acquire().await.map(|c| self.lend(Lent::Pooled(c)));
        }
        loop {
            // Most recently used first: the others stay idle and get pinged or closed later.
            let popped = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let Some((connection, idle_since)) = popped else {
                break;
            };
            let mut lent = self.lend(Lent::Dedicated(connection));
            if idle_since.elapsed() < PING_AFTER_IDLE {
                return Ok(lent);
            }
            let pinged = lent.connection().ping().await;
            lent.finish(&pinged);
            if pinged.is_ok() {
                return Ok(lent);
            }
            // Broken: dropping `lent` (not reusable) closes it and frees its place.
        }
        let below_capacity = |open| (open < self.capacity).then_some(open + 1);
        if self
            .open
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, below_capacity)
            .is_ok()
        {
            // Holds the place while the pool connects; gives it back if that fails or is cancelled.
            let mut place = self.lend(Lent::Opening);
            place.lent = Lent::Dedicated(pool.acquire().await?.detach());
            return Ok(place);
        }
        pool.acquire().await.map(|c| self.lend(Lent::Pooled(c)))
    }

    fn lend(&self, lent: Lent<DB>) -> LockConnection<'_, DB> {
        LockConnection {
            owner: self,
            lent,
            reusable: false,
        }
    }
}

impl<DB: Database> std::fmt::Debug for DedicatedConnections<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DedicatedConnections")
            .field("capacity", &self.capacity)
            .field("open", &self.open.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl<DB: Database> Drop for DedicatedConnections<DB> {
    fn drop(&mut self) {
        // Say goodbye to the server rather than just closing the sockets, where possible.
        let idle = self.take_idle();
        if !idle.is_empty()
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(async move {
                for (connection, _) in idle {
                    let _ = connection.close().await;
                }
            });
        }
    }
}

enum Lent<DB: Database> {
    Dedicated(DB::Connection),
    Pooled(PoolConnection<DB>),
    /// A dedicated place whose connection is being opened, or a connection given back.
    Opening,
}

/// One operation's connection. A dedicated one goes back to the provider when the operation
/// [`finish`](Self::finish)ed with a usable connection, and is closed otherwise (an I/O error,
/// or the operation's future dropped mid-statement, which leaves the connection unusable); a
/// pooled one goes back to the pool either way.
pub(crate) struct LockConnection<'a, DB: Database> {
    owner: &'a DedicatedConnections<DB>,
    lent: Lent<DB>,
    reusable: bool,
}

impl<DB: Database> LockConnection<'_, DB> {
    /// The connection to run a statement on; pass the statement's outcome to
    /// [`finish`](Self::finish). Until then the connection counts as mid-statement, so it is
    /// closed if the operation is dropped.
    pub(crate) fn connection(&mut self) -> &mut DB::Connection {
        self.reusable = false;
        match &mut self.lent {
            Lent::Dedicated(connection) => connection,
            Lent::Pooled(connection) => connection,
            Lent::Opening => unreachable!("a LockConnection is lent with a connection"),
        }
    }

    /// Records the outcome of the operation's last statement: the connection is reusable after
    /// a success or an error the database reported, not after a failure of the connection.
    pub(crate) fn finish<T>(&mut self, outcome: &Result<T, sqlx::Error>) {
        self.reusable = matches!(outcome, Ok(_) | Err(sqlx::Error::Database(_)));
    }
}

impl<DB: Database> Drop for LockConnection<'_, DB> {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.lent, Lent::Opening) {
            Lent::Dedicated(connection) if self.reusable => {
                self.owner
                    .idle
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((connection, Instant::now()));
            }
            // Returned to the pool, which pings it and decides.
            Lent::Pooled(connection) => drop(connection),
            // Closed (by dropping it): its state is unknown.
            Lent::Dedicated(_) | Lent::Opening => {
                self.owner.open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

impl<DB: Database> std::fmt::Debug for LockConnection<'_, DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.lent {
            Lent::Dedicated(_) => "dedicated",
            Lent::Pooled(_) => "pooled",
            Lent::Opening => "opening",
        };
        f.debug_struct("LockConnection")
            .field("kind", &kind)
            .finish()
    }
}

#[cfg(all(test, feature = "sqlite"))]
mod tests {
    use sqlx::sqlite::SqlitePoolOptions;
    use sqlx::{Sqlite, SqlitePool};

    use super::*;

    async fn pool() -> SqlitePool {
        SqlitePoolOptions::new()
            .max_connections(4)
            .connect("sqlite::memory:")
            .await
            .unwrap()
    }

    fn counts(dedicated: &DedicatedConnections<Sqlite>) -> (usize, usize) {
        let idle = dedicated.idle.lock().unwrap().len();
        (dedicated.open.load(Ordering::Relaxed), idle)
    }

    fn is_dedicated(connection: &LockConnection<'_, Sqlite>) -> bool {
        matches!(connection.lent, Lent::Dedicated(_))
    }

    async fn run(connection: &mut LockConnection<'_, Sqlite>, sql: &'static str) {
        let outcome = sqlx::query(sql).execute(connection.connection()).await;
        connection.finish(&outcome);
    }

    #[tokio::test]
    async fn reused_after_success_and_database_errors() {
        let (pool, dedicated) = (pool().await, DedicatedConnections::new(1));
        let mut connection = dedicated.get(&pool).await.unwrap();
        assert!(is_dedicated(&connection));
        run(&mut connection, "SELECT 1").await;
        drop(connection);
        assert_eq!(counts(&dedicated), (1, 1));

        let mut connection = dedicated.get(&pool).await.unwrap();
        assert!(is_dedicated(&connection));
        assert_eq!(counts(&dedicated), (1, 0));
        run(&mut connection, "SELEC 1").await; // a syntax error: the connection is fine
        drop(connection);
        assert_eq!(counts(&dedicated), (1, 1));
    }

    #[tokio::test]
    async fn the_pool_serves_when_all_are_busy_or_none_configured() {
        let (pool, dedicated) = (pool().await, DedicatedConnections::new(1));
        let first = dedicated.get(&pool).await.unwrap();
        let second = dedicated.get(&pool).await.unwrap();
        assert!(is_dedicated(&first) && !is_dedicated(&second));
        let none = DedicatedConnections::new(0);
        assert!(!is_dedicated(&none.get(&pool).await.unwrap()));
    }

    #[tokio::test]
    async fn closed_when_dropped_mid_statement() {
        let (pool, dedicated) = (pool().await, DedicatedConnections::new(2));
        let mut connection = dedicated.get(&pool).await.unwrap();
        run(&mut connection, "SELECT 1").await;
        let _ = connection.connection(); // a statement starts and is abandoned
        drop(connection);
        assert_eq!(counts(&dedicated), (0, 0));
        // Never used at all: closed as well.
        drop(dedicated.get(&pool).await.unwrap());
        assert_eq!(counts(&dedicated), (0, 0));
    }

    #[tokio::test]
    async fn closed_with_the_pool() {
        let (pool, dedicated) = (pool().await, DedicatedConnections::new(2));
        let mut connection = dedicated.get(&pool).await.unwrap();
        run(&mut connection, "SELECT 1").await;
        drop(connection);
        // Detached connections do not hold up closing the pool.
        tokio::time::timeout(Duration::from_secs(5), pool.close())
            .await
            .unwrap();
        assert!(matches!(
            dedicated.get(&pool).await,
            Err(sqlx::Error::PoolClosed)
        ));
        assert_eq!(counts(&dedicated), (0, 0));
    }
}
