//! Conversions between Rust and SQL values: lease durations, times, fencing tokens, trusted
//! SQL text, and the checks every dialect applies before touching the table.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use chrono::NaiveDateTime;
use sqlx::{AssertSqlSafe, SqlSafeStr, SqlStr};

/// Longest lease written to a table: about 1000 years, so `now + lease` stays inside every
/// dialect's date range (MySQL `DATETIME` and SQLite text end at year 9999).
const MAX_LEASE_MILLIS: i64 = 1000 * 365 * 24 * 60 * 60 * 1000;

/// A lease duration in whole milliseconds for SQL: rounded up (a lock never ends early) and
/// capped at about 1000 years ("forever" for a scheduler).
pub(crate) fn lease_millis(duration: Duration) -> i64 {
    let millis = duration.as_nanos().div_ceil(1_000_000);
    i64::try_from(millis).map_or(MAX_LEASE_MILLIS, |m| m.min(MAX_LEASE_MILLIS))
}

/// A UTC timestamp read from the lock table.
pub(crate) fn system_time(utc: NaiveDateTime) -> SystemTime {
    utc.and_utc().into()
}

/// A fencing token as the `BIGINT` column holds it. Tokens come from the table, so one that
/// does not fit cannot match any row: `None` means "not ours".
pub(crate) fn token_param(fencing_token: u64) -> Option<i64> {
    i64::try_from(fencing_token).ok()
}

// Token floor. Tokens never go back, even when a row is deleted (an operator's reset, a
// `TRUNCATE`, a restored backup): every acquisition writes `max(previous + 1, database clock in
// µs since 1970)` in the same statement. Consecutive acquisitions of a row count up; a row
// created again starts above every token issued before it, as long as the database clock has
// not stepped back by more than the time since those were issued. A sequence would not survive
// a `TRUNCATE … RESTART IDENTITY` or a restored backup; the clock survives all three.

/// A fencing token read from the table. The statements never write one below 1, but a row
/// edited by hand may hold anything.
pub(crate) fn token_from_db(token: i64) -> Result<u64, String> {
    u64::try_from(token).map_err(|_| format!("the table returned a negative fencing token {token}"))
}

/// The one row a lock statement returns at most, from the statement read to its end.
///
/// Lock statements run in autocommit, and the database commits after the last row: SQLite at
/// the step that reaches the end of a `RETURNING` statement, PostgreSQL after the rows it
/// streams (a deferred constraint, a serialization failure at `SERIALIZABLE`). A failed commit
/// is reported only to a reader that goes on to the end, so every lock statement is read with
/// `fetch_all` or `execute`, never stopped at its first row, and its rows handed here.
#[cfg_attr(not(any(feature = "postgres", feature = "sqlite")), allow(dead_code))]
pub(crate) fn single<T>(rows: Vec<T>) -> Result<Option<T>, sqlx::Error> {
    if rows.len() > 1 {
        return Err(sqlx::Error::Protocol(format!(
            "a lock statement returned {} rows where at most one was expected",
            rows.len()
        )));
    }
    Ok(rows.into_iter().next())
}

/// SQL text built once at construction from a [`Table`], whose identifiers were validated.
/// Shared, so handing it to `sqlx::query` per call costs a reference count, not a copy.
pub(crate) fn trusted_sql(text: String) -> SqlStr {
    AssertSqlSafe(Arc::<str>::from(text)).into_sql_str()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lease_millis_rounds_up_and_caps() {
        assert_eq!(lease_millis(Duration::ZERO), 0);
        assert_eq!(lease_millis(Duration::from_nanos(1)), 1);
        assert_eq!(lease_millis(Duration::from_millis(800)), 800);
        assert_eq!(lease_millis(Duration::from_micros(800_001)), 801);
        assert_eq!(lease_millis(Duration::MAX), MAX_LEASE_MILLIS);
    }

    #[test]
    fn tokens_convert_without_panicking() {
        assert_eq!(token_param(u64::MAX), None);
        assert_eq!(token_param(7), Some(7));
    }

    #[test]
    fn tokens_from_the_table_must_not_be_negative() {
        assert!(token_from_db(-1).is_err());
        assert_eq!(token_from_db(i64::MAX), Ok(i64::MAX as u64));
    }
}
