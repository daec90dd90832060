//! One row of the lock table, as the read-only inspection methods return it.

use std::fmt;
use std::time::{Duration, SystemTime};

use chrono::{DateTime, NaiveDateTime, SecondsFormat, Utc};

use crate::system_time;

/// A row of the lock table, read with `lock_state` or `list_locks`.
///
/// `held` is decided by the database clock at the moment of reading (`lock_until > now`).
/// [`Display`](fmt::Display) prints one line for a person:
/// `nightly: held by web-1:4121:a83e until 2025-06-01T12:00:00.000Z (token 7)`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LockRow {
    /// The lock's name.
    pub name: String,
    /// When the current or last lease ends (database clock, UTC).
    pub lock_until: SystemTime,
    /// When the current or last lease was granted (database clock, UTC).
    pub locked_at: SystemTime,
    /// Who holds or last held the lock.
    pub locked_by: String,
    /// The token of the last acquisition, as stored (0 for a row no shedlock provider acquired yet).
    pub fencing_token: i64,
    /// Whether the lease was still running when the row was read (database clock).
    pub held: bool,
    /// The database clock when the row was read (UTC): the instant `held` was decided at.
    pub read_at: SystemTime,
}

impl LockRow {
    pub(crate) fn from_parts(
        (name, lock_until, locked_at, locked_by, fencing_token, held, read_at): RowParts,
    ) -> Self {
        LockRow {
            name,
            lock_until: system_time(lock_until),
            locked_at: system_time(locked_at),
            locked_by,
            fencing_token,
            held,
            read_at: system_time(read_at),
        }
    }

    /// How long the lease still runs, on the database clock: `lock_until - read_at`, zero
    /// for a lock that is free.
    pub fn remaining(&self) -> Duration {
        if !self.held {
            return Duration::ZERO;
        }
        self.lock_until
            .duration_since(self.read_at)
            .unwrap_or(Duration::ZERO)
    }
}

/// The columns of the dialects' inspection queries, in order.
pub(crate) type RowParts = (
    String,
    NaiveDateTime,
    NaiveDateTime,
    String,
    i64,
    bool,
    NaiveDateTime,
);

impl fmt::Display for LockRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let time =
            |t: SystemTime| DateTime::<Utc>::from(t).to_rfc3339_opts(SecondsFormat::Millis, true);
        let state = if self.held { "held" } else { "last held" };
        write!(
            f,
            "{}: {state} by {} until {} (token {})",
            self.name,
            self.locked_by,
            time(self.lock_until),
            self.fencing_token
        )
    }
}
