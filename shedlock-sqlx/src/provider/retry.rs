//! Retrying statements the database aborted as serialization failures.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

/// Runs one operation's statements (`$statements`, given a connection) on a connection of the
/// provider's, again after a serialization failure (bounded, with jitter), and once more on a
/// new connection when one that had been idle turns out broken. Evaluates to
/// `Result<T, Option<sqlx::Error>>`, `Err(None)` when the conflict persisted.
///
/// A macro rather than a function taking an async closure: the closure's future could not be
/// shown `Send` for every lifetime, which `async_trait` requires.
macro_rules! run {
    ($provider:expr, |$connection:ident| $statements:expr) => {{
        let mut reconnected = false;
        $crate::provider::retry::run!($provider, reconnected = reconnected, |$connection| $statements)
    }};
    // `$reconnected` (a `bool` place) tells afterwards whether the statements ran again on a
    // new connection: the first run's outcome is then unknown.
    ($provider:expr, reconnected = $reconnected:ident, |$connection:ident| $statements:expr) => {{
        let mut retry = $crate::provider::retry::Retry::new();
        let reconnected = &mut $reconnected;
        loop {
            let mut lent = match $provider.connections.get(&$provider.pool).await {
                Ok(lent) => lent,
                Err(e) => break Err(Some(e)),
            };
            let outcome = {
                let $connection = lent.connection();
                $statements.await
            };
            lent.finish(&outcome);
            let stale = lent.failed_after_idle();
            // Closes a broken connection, and with it the idle ones.
            drop(lent);
            match outcome {
                // Once, on a new connection: the statements are conditional on the table, so
                // running them again never grants a lease twice.
                Err(e) if stale && !*reconnected => {
                    tracing::debug!(error = %e, "connection lost while idle; running again on a new one");
                    *reconnected = true;
                }
                Err(e) if $crate::provider::retry::Retry::is_serialization_failure(&e) => {
                    if !retry.pause().await {
                        tracing::debug!(error = %e, "serialization failures persisted");
                        break Err(None);
                    }
                }
                outcome => break outcome.map_err(Some),
            }
        }
    }};
}

pub(crate) use run;

/// Pauses between attempts: random, up to a limit that doubles from 2 ms.
#[derive(Debug)]
pub(crate) struct Retry {
    attempt: u32,
}

impl Retry {
    /// Attempts in all, the first one included.
    pub(crate) const ATTEMPTS: u32 = 6;
    const FIRST_LIMIT: Duration = Duration::from_millis(2);

    pub(crate) fn new() -> Self {
        Retry { attempt: 1 }
    }

    /// SQLSTATE `40001` (serialization failure: PostgreSQL at `SERIALIZABLE` or
    /// `REPEATABLE READ`, CockroachDB, a MySQL deadlock) or `40P01` (a PostgreSQL deadlock):
    /// the database rolled the statement's transaction back, so running it again is safe.
    pub(crate) fn is_serialization_failure(error: &sqlx::Error) -> bool {
        error
            .as_database_error()
            .and_then(|e| e.code())
            .is_some_and(|code| matches!(&*code, "40001" | "40P01"))
    }

    /// Waits before the next attempt; `false` when none is left.
    pub(crate) async fn pause(&mut self) -> bool {
        if self.attempt >= Self::ATTEMPTS {
            return false;
        }
        let limit = Self::FIRST_LIMIT * (1 << (self.attempt - 1));
        self.attempt += 1;
        tokio::time::sleep(jitter(limit)).await;
        true
    }
}

/// A random duration in `[0, limit)`: concurrent retries of the same conflict spread out.
fn jitter(limit: Duration) -> Duration {
    let random = RandomState::new().hash_one(std::time::Instant::now());
    let nanos = u64::try_from(limit.as_nanos()).unwrap_or(u64::MAX).max(1);
    Duration::from_nanos(random % nanos)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn bounded_with_growing_pauses() {
        let mut retry = Retry::new();
        let started = tokio::time::Instant::now();
        let mut pauses = 0;
        while retry.pause().await {
            pauses += 1;
        }
        assert_eq!(pauses, Retry::ATTEMPTS - 1);
        assert!(started.elapsed() < Duration::from_millis(2 + 4 + 8 + 16 + 32));
    }

    #[test]
    fn jitter_stays_below_its_limit() {
        for _ in 0..100 {
            assert!(jitter(Duration::from_millis(2)) < Duration::from_millis(2));
        }
        assert_eq!(jitter(Duration::ZERO), Duration::ZERO);
    }
}
