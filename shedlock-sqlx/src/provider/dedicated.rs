//! Connections a provider keeps for its lock statements, outside the pool
//! (`dedicated_connections`).
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
use tokio::sync::{Semaphore, SemaphorePermit};

/// A dedicated connection idle for longer than this is pinged before use, since the server or
/// the network may have dropped it meanwhile.
const PING_AFTER_IDLE: Duration = Duration::from_secs(30);

/// A dedicated connection idle for longer than this is closed (checked at each operation), so
/// that a burst of concurrent lock statements does not hold its connections for good.
const CLOSE_AFTER_IDLE: Duration = Duration::from_secs(60);

/// Up to `capacity` connections opened through the pool, detached from it, and reused for lock
/// statements; with a capacity of 0, every statement checks a connection out of the pool.
pub(crate) struct DedicatedConnections<DB: Database> {
    capacity: usize,
    /// One permit per connection in use (or being opened); idle ones hold none.
    permits: Semaphore,
    /// Permits given up because the server had no room for another connection.
    forgotten: AtomicUsize,
    idle: Mutex<Vec<(DB::Connection, Instant)>>,
}

impl<DB: Database> DedicatedConnections<DB> {
    pub(crate) fn new(capacity: usize) -> Self {
        DedicatedConnections {
            capacity,
            permits: Semaphore::new(capacity.min(Semaphore::MAX_PERMITS)),
            forgotten: AtomicUsize::new(0),
            idle: Mutex::new(Vec::new()),
        }
    }

    fn take_idle(&self) -> Vec<(DB::Connection, Instant)> {
        std::mem::take(&mut *self.idle.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// A connection for one operation: an idle dedicated one, else a new one while fewer than
    /// `capacity` are in use, else the next one given back (waiting as for a pool's).
    pub(crate) async fn get(&self, pool: &Pool<DB>) -> Result<LockConnection<'_, DB>, sqlx::Error> {
        if self.capacity == 0 {
            return Ok(self.lend(Lent::Pooled(pool.acquire().await?), None));
        }
        if pool.is_closed() {
            // Closing the pool ends the dedicated connections too.
            for (connection, _) in self.take_idle() {
                let _ = connection.close().await;
            }
            return Err(sqlx::Error::PoolClosed);
        }
        self.close_long_idle();
        loop {
            let Ok(permit) = self.permits.acquire().await else {
                return Err(sqlx::Error::PoolClosed); // never closed; answered like a closed pool
            };
            let permit = match self.reuse_idle(permit).await {
                Ok(lent) => return Ok(lent),
                Err(permit) => permit,
            };
            // Not `pool.acquire()`: that waits in sqlx's connect backoff (see `connect`).
            match crate::connect::open(pool).await {
                Ok(connection) => {
                    return Ok(self.lend(Lent::Dedicated(connection), Some(permit)));
                }
                // The server has no connection to spare but this provider holds others: make do
                // with those, one place fewer from now on, rather than fail the operation.
                Err(e) if is_too_many_connections(&e) && self.in_use() > 1 => {
                    tracing::warn!(
                        error = %e,
                        "the database refused another connection for lock statements; \
                         waiting for the provider's others (one fewer from now on)"
                    );
                    permit.forget();
                    self.forgotten.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether every connection this provider may open is in use, so that an operation would
    /// wait for one (never with a capacity of 0: those operations wait for the pool).
    pub(crate) fn all_busy(&self) -> bool {
        self.capacity > 0 && self.permits.available_permits() == 0
    }

    /// Connections handed out right now.
    fn in_use(&self) -> usize {
        self.capacity
            .saturating_sub(self.forgotten.load(Ordering::Relaxed))
            .saturating_sub(self.permits.available_permits())
    }

    /// An idle connection, pinged first if it was idle long; the permit back when none is
    /// left.
    async fn reuse_idle<'a>(
        &'a self,
        permit: SemaphorePermit<'a>,
    ) -> Result<LockConnection<'a, DB>, SemaphorePermit<'a>> {
        loop {
            // Most recently used first: the others stay idle and get pinged or closed later.
            let popped = self.idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let Some((connection, idle_since)) = popped else {
                return Err(permit);
            };
            if idle_since.elapsed() < PING_AFTER_IDLE {
                let mut lent = self.lend(Lent::Dedicated(connection), Some(permit));
                lent.reused = true;
                return Ok(lent);
            }
            let mut lent = self.lend(Lent::Dedicated(connection), None);
            let pinged = lent.connection().ping().await;
            lent.finish(&pinged);
            if pinged.is_ok() {
                lent.permit = Some(permit);
                lent.reused = true;
                return Ok(lent);
            }
            // Broken: dropping `lent` closes it, and the other idle ones.
        }
    }

    /// Closes the least recently used idle connection if it was idle too long (one per call:
    /// enough for steady traffic, and cheap).
    fn close_long_idle(&self) {
        let mut idle = self.idle.lock().unwrap_or_else(|e| e.into_inner());
        if idle
            .first()
            .is_some_and(|(_, since)| since.elapsed() >= CLOSE_AFTER_IDLE)
        {
            // Dropped without a goodbye: closing politely would need an await under the lock.
            drop(idle.remove(0));
        }
    }

    fn lend<'a>(
        &'a self,
        lent: Lent<DB>,
        permit: Option<SemaphorePermit<'a>>,
    ) -> LockConnection<'a, DB> {
        LockConnection {
            owner: self,
            lent: Some(lent),
            permit,
            state: State::Lent,
            reused: false,
        }
    }
}

impl<DB: Database> std::fmt::Debug for DedicatedConnections<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DedicatedConnections")
            .field("capacity", &self.capacity)
            .field("available", &self.permits.available_permits())
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
}

/// Where an operation's connection stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Handed out, or its last statement finished: reusable.
    Lent,
    /// A statement is running on it (if the operation is dropped now, its state is unknown).
    Busy,
    /// A statement failed on the connection itself (I/O, protocol).
    Failed,
}

/// One operation's connection. A dedicated one goes back to the provider when the operation
/// [`finish`](Self::finish)ed with a usable connection, and is closed otherwise (an I/O error,
/// or the operation's future dropped mid-statement, which leaves the connection unusable); a
/// pooled one goes back to the pool either way.
pub(crate) struct LockConnection<'a, DB: Database> {
    owner: &'a DedicatedConnections<DB>,
    lent: Option<Lent<DB>>,
    /// Declared after `lent`, so that a connection is idle again before its place is freed.
    permit: Option<SemaphorePermit<'a>>,
    state: State,
    /// A dedicated connection that was idle before this operation (not opened for it).
    reused: bool,
}

impl<DB: Database> LockConnection<'_, DB> {
    /// The connection to run a statement on; pass the statement's outcome to
    /// [`finish`](Self::finish). Until then the connection counts as mid-statement, so it is
    /// closed if the operation is dropped.
    pub(crate) fn connection(&mut self) -> &mut DB::Connection {
        self.state = State::Busy;
        match self.lent.as_mut() {
            Some(Lent::Dedicated(connection)) => connection,
            Some(Lent::Pooled(connection)) => connection,
            None => unreachable!("a LockConnection holds its connection until dropped"),
        }
    }

    /// Whether the operation failed on a connection that had been idle: the server may have
    /// dropped it meanwhile (a restart, a cut network), so the operation deserves another
    /// attempt on a new connection.
    pub(crate) fn failed_after_idle(&self) -> bool {
        self.reused && self.state == State::Failed
    }

    /// Records the outcome of the operation's last statement: the connection is reusable after
    /// a success or an error the database reported, not after a failure of the connection.
    pub(crate) fn finish<T>(&mut self, outcome: &Result<T, sqlx::Error>) {
        self.state = match outcome {
            Err(sqlx::Error::Database(e)) if ends_the_session(e.code().as_deref()) => State::Failed,
            Ok(_) | Err(sqlx::Error::Database(_)) => State::Lent,
            Err(_) => State::Failed,
        };
    }
}

/// The server refused a new connection for lack of room: PostgreSQL's `53300`
/// (too_many_connections), MySQL's `08004` (ER_CON_COUNT_ERROR, 1040).
fn is_too_many_connections(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| matches!(&*code, "53300" | "08004"))
}

/// Database errors that end the session: SQLSTATE class `08` (connection exception), `57P`
/// (PostgreSQL: terminated by an administrator, crash or shutdown) and `70100` (MySQL/MariaDB:
/// connection killed). The server sends them just before closing the connection. Also
/// PostgreSQL's `25006` (a write in a read-only transaction): the server was made read-only
/// under the connection (demoted), so a new one is opened, which `connect_to_primary` checks.
fn ends_the_session(sqlstate: Option<&str>) -> bool {
    sqlstate.is_some_and(|code| {
        code.starts_with("08") || code.starts_with("57P") || code == "70100" || code == "25006"
    })
}

impl<DB: Database> Drop for LockConnection<'_, DB> {
    fn drop(&mut self) {
        match (self.lent.take(), self.state) {
            (Some(Lent::Dedicated(connection)), State::Lent) => {
                self.owner
                    .idle
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push((connection, Instant::now()));
            }
            // What broke this connection (a restarted server, a cut network) most likely broke
            // the idle ones too: close them, so that only this operation sees the error.
            (Some(Lent::Dedicated(_)), State::Failed) => drop(self.owner.take_idle()),
            // Returned to the pool, which pings it and decides; or closed by dropping it (a
            // statement was abandoned mid-way, its state is unknown).
            _ => {}
        }
    }
}

impl<DB: Database> std::fmt::Debug for LockConnection<'_, DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let kind = match self.lent {
            Some(Lent::Dedicated(_)) => "dedicated",
            Some(Lent::Pooled(_)) => "pooled",
            None => "returned",
        };
        f.debug_struct("LockConnection")
            .field("kind", &kind)
            .field("state", &self.state)
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

    /// (connections in existence, idle ones)
    fn counts(dedicated: &DedicatedConnections<Sqlite>) -> (usize, usize) {
        let idle = dedicated.idle.lock().unwrap().len();
        (
            dedicated.capacity - dedicated.permits.available_permits(),
            idle,
        )
    }

    fn is_dedicated(connection: &LockConnection<'_, Sqlite>) -> bool {
        matches!(connection.lent, Some(Lent::Dedicated(_)))
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
        assert_eq!(counts(&dedicated), (0, 1));

        let mut connection = dedicated.get(&pool).await.unwrap();
        assert!(is_dedicated(&connection));
        assert_eq!(counts(&dedicated), (1, 0));
        run(&mut connection, "SELEC 1").await; // a syntax error: the connection is fine
        drop(connection);
        assert_eq!(counts(&dedicated), (0, 1));
    }

    #[tokio::test]
    async fn waits_when_all_are_busy_and_uses_the_pool_when_none_configured() {
        let (pool, dedicated) = (pool().await, DedicatedConnections::new(1));
        let first = dedicated.get(&pool).await.unwrap();
        let mut second = std::pin::pin!(dedicated.get(&pool));
        assert!(
            futures_poll_once(second.as_mut()).await.is_none(),
            "did not wait"
        );
        drop(first);
        assert!(is_dedicated(&second.await.unwrap()));
        let none = DedicatedConnections::new(0);
        assert!(!is_dedicated(&none.get(&pool).await.unwrap()));
    }

    /// Polls a future once: its output if it was ready.
    async fn futures_poll_once<F: std::future::Future + Unpin>(future: F) -> Option<F::Output> {
        tokio::time::timeout(Duration::ZERO, future).await.ok()
    }

    #[tokio::test]
    async fn closed_when_dropped_mid_statement() {
        let (pool, dedicated) = (pool().await, DedicatedConnections::new(2));
        let mut connection = dedicated.get(&pool).await.unwrap();
        run(&mut connection, "SELECT 1").await;
        let _ = connection.connection(); // a statement starts and is abandoned
        drop(connection);
        assert_eq!(counts(&dedicated), (0, 0));
    }

    #[tokio::test]
    async fn a_broken_connection_takes_the_idle_ones_with_it() {
        let (pool, dedicated) = (pool().await, DedicatedConnections::new(3));
        let (mut a, mut b) = (
            dedicated.get(&pool).await.unwrap(),
            dedicated.get(&pool).await.unwrap(),
        );
        run(&mut a, "SELECT 1").await;
        run(&mut b, "SELECT 1").await;
        drop(a);
        assert_eq!(counts(&dedicated), (1, 1));
        let _ = b.connection();
        b.finish::<()>(&Err(sqlx::Error::Io(std::io::ErrorKind::BrokenPipe.into())));
        drop(b);
        assert_eq!(counts(&dedicated), (0, 0));
    }

    #[tokio::test]
    async fn long_idle_connections_are_closed() {
        let (pool, dedicated) = (pool().await, DedicatedConnections::new(2));
        let (mut a, mut b) = (
            dedicated.get(&pool).await.unwrap(),
            dedicated.get(&pool).await.unwrap(),
        );
        run(&mut a, "SELECT 1").await;
        run(&mut b, "SELECT 1").await;
        drop((a, b));
        let long_ago = Instant::now().checked_sub(CLOSE_AFTER_IDLE).unwrap();
        dedicated.idle.lock().unwrap()[0].1 = long_ago;
        // The next operation closes the least recently used one, and reuses the other.
        let connection = dedicated.get(&pool).await.unwrap();
        assert!(is_dedicated(&connection));
        assert_eq!(counts(&dedicated), (1, 0));
    }

    #[test]
    fn session_ending_errors_are_connection_failures() {
        for code in ["57P01", "57P02", "08006", "70100", "25006"] {
            assert!(ends_the_session(Some(code)), "{code}");
        }
        for code in [Some("40001"), Some("23505"), None] {
            assert!(!ends_the_session(code), "{code:?}");
        }
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
