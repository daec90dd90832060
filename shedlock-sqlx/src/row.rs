//! Rows of the lock table as [`LockRecord`]s, the one view of a lock every store gives.

use chrono::NaiveDateTime;
use shedlock_core::LockRecord;

use crate::system_time;

/// The columns of the dialects' inspection queries, in order: name, `lock_until`,
/// `locked_at`, `locked_by`, token (0 for none), and the database clock when read.
pub(crate) type RowParts = (
    String,
    NaiveDateTime,
    NaiveDateTime,
    String,
    i64,
    NaiveDateTime,
);

/// A row as a record; a negative token (a row edited by hand) reads as 0, as the statements
/// count it.
pub(crate) fn record(
    (name, lock_until, locked_at, locked_by, token, read_at): RowParts,
) -> LockRecord {
    LockRecord::new(
        name,
        locked_by,
        system_time(locked_at),
        system_time(lock_until),
        u64::try_from(token).unwrap_or(0),
        system_time(read_at),
    )
}
