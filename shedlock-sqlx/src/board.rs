//! The fleet's board ([`Board`]) in a table of its own beside the lock table
//! (`<table>_board` by default): one row per key, its value, a version from a store-wide
//! increasing source, and the database's times. Every condition is decided by the database in
//! the statement (or short transaction) that writes.
//!
//! | database | version from | write | remove | read |
//! |---|---|---|---|---|
//! | PostgreSQL | a sequence, `<board>_version` | 1 statement | 1 statement | 1 statement |
//! | MySQL, MariaDB | the table's `AUTO_INCREMENT` | 1 statement (`Version`: a transaction of 2) | 1 or 2 | 1 statement |
//! | SQLite | `INTEGER PRIMARY KEY AUTOINCREMENT` | 1 statement | 1 statement | 1 statement |

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use chrono::NaiveDateTime;
use shedlock_core::{
    Board, BoardCondition, BoardEntry, Error, Operation, async_trait, validate_board_entry,
};
use sqlx::Pool;

use crate::dialect::Driver;
use crate::provider::retry::run;
use crate::{ColumnNames, Dialect, SqlLockProvider, Table, store_error, system_time};

#[cfg(feature = "mysql")]
mod mysql;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "sqlite")]
mod sqlite;

/// `<table>_board` (in the table's schema), cut and given a hash of the table's name when
/// longer than an identifier may be, as the run table's name is.
pub(crate) fn default_board_table(table: &str) -> String {
    let (schema, name) = split(table);
    format!("{schema}{}", crate::runs::index_name(name, "board"))
}

/// `("schema.", "name")` of `schema.name`, `("", "name")` of `name`.
pub(crate) fn split(table: &str) -> (&str, &str) {
    match table.split_once('.') {
        Some((schema, bare)) => (&table[..=schema.len()], bare),
        None => ("", table),
    }
}

/// A row of the board as the statements return it: key, value, version, written at, expires
/// at (UTC).
pub(crate) type BoardRow = (String, String, i64, NaiveDateTime, Option<NaiveDateTime>);

/// A board condition as the statements bind it: 0 always, 1 absent, 2 the version.
pub(crate) fn condition_kind(condition: BoardCondition) -> (i32, i64) {
    match condition {
        BoardCondition::Always => (0, 0),
        BoardCondition::Absent => (1, 0),
        // A version past what the column holds matches no row.
        BoardCondition::Version(version) => (2, i64::try_from(version).unwrap_or(-1)),
    }
}

/// The first string after every string that starts with `prefix` (in byte order, which is
/// code point order in UTF-8): `prefix` with its last character replaced by the next one.
/// `None` when every string from `prefix` on starts with it (empty, or only U+10FFFF).
pub(crate) fn prefix_end(prefix: &str) -> Option<String> {
    let mut chars: Vec<char> = prefix.chars().collect();
    while let Some(last) = chars.pop() {
        let next = match u32::from(last) + 1 {
            0xD800 => Some('\u{E000}'),
            code => char::from_u32(code),
        };
        if let Some(next) = next {
            chars.push(next);
            return Some(chars.into_iter().collect());
        }
    }
    None
}

/// The board of one provider: its table, as errors name it, and its statements.
#[derive(Debug)]
pub(crate) struct BoardTable<DB: BoardDriver> {
    pub(crate) table: Table,
    pub(crate) sql: DB::BoardStatements,
}

impl<DB: BoardDriver> BoardTable<DB> {
    pub(crate) fn new(name: String) -> Self {
        BoardTable {
            sql: DB::board_statements(&name),
            table: Table {
                name,
                columns: ColumnNames::default(),
            },
        }
    }

    pub(crate) fn name(&self) -> &str {
        &self.table.name
    }
}

/// The board's side of a database driver: its table, statements and how they run. Implemented
/// once per database, in `board/<database>.rs`; not public API.
#[doc(hidden)]
pub trait BoardDriver: Driver {
    /// The statements of one board table.
    type BoardStatements: Debug + Send + Sync;

    /// Builds the statements for the (validated) table `table`.
    fn board_statements(table: &str) -> Self::BoardStatements;

    /// `CREATE TABLE IF NOT EXISTS` (and what the table needs beside it) for `table`.
    fn board_create_sql(table: &str) -> String;

    /// Creates the board table (and its version source) if missing; idempotent.
    fn create_board<'a>(
        pool: &'a Pool<Self>,
        table: &'a str,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a;

    /// The live rows from `from` (inclusive) to `to` (exclusive; `None`: to the end), by key.
    fn board_rows<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a Self::BoardStatements,
        from: &'a str,
        to: Option<&'a str>,
    ) -> impl Future<Output = Result<Vec<BoardRow>, sqlx::Error>> + Send + 'a;

    /// Writes `value` at `key` if `condition` holds, live for `ttl_millis` (`None`: kept):
    /// the new version, or `None` when the condition did not hold.
    fn board_write<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a Self::BoardStatements,
        key: &'a str,
        value: &'a str,
        condition: BoardCondition,
        ttl_millis: Option<i64>,
    ) -> impl Future<Output = Result<Option<i64>, sqlx::Error>> + Send + 'a;

    /// Removes the entry at `key` if it is live and `condition` holds (whether it did), and an
    /// expired one whatever the condition.
    fn board_remove<'a>(
        connection: &'a mut Self::Connection,
        sql: &'a Self::BoardStatements,
        key: &'a str,
        condition: BoardCondition,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send + 'a;
}

impl<D: Dialect> SqlLockProvider<D> {
    /// The board table ([`Board`]), as configured (`<table>_board` by default).
    pub fn board_table(&self) -> &str {
        self.board.name()
    }

    fn board_error(&self, key: &str, error: Option<sqlx::Error>) -> Error {
        match error {
            Some(e) => store_error(Operation::Jobs, key, &self.board.table, e),
            None => Error::store(
                Operation::Jobs,
                key,
                format!(
                    "serialization failures persisted after {} attempts",
                    crate::provider::retry::Retry::ATTEMPTS
                ),
            ),
        }
    }
}

fn entry(row: BoardRow) -> Result<BoardEntry, Error> {
    let (key, value, version, written_at, expires_at) = row;
    let version = u64::try_from(version).map_err(|_| {
        Error::store(
            Operation::Jobs,
            &key,
            format!("the board table returned a negative version {version}"),
        )
    })?;
    Ok(BoardEntry::new(
        key,
        value,
        version,
        system_time(written_at),
        expires_at.map(system_time),
    ))
}

/// The fleet's board in the board table: see the crate's "Fleet board" section.
#[async_trait]
impl<D: Dialect> Board for SqlLockProvider<D> {
    async fn board_read(&self, prefix: &str) -> Result<Vec<BoardEntry>, Error> {
        let end = prefix_end(prefix);
        let sql = &self.board.sql;
        let to = end.as_deref();
        let rows = run!(self, |c| <D::Database as BoardDriver>::board_rows(
            c, sql, prefix, to
        ))
        .map_err(|e| self.board_error(prefix, e))?;
        rows.into_iter().map(entry).collect()
    }

    async fn board_write(
        &self,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl: Option<Duration>,
    ) -> Result<Option<u64>, Error> {
        validate_board_entry(key, value)?;
        if let BoardCondition::Version(version) = condition
            && i64::try_from(version).is_err()
        {
            return Ok(None);
        }
        let ttl = ttl.map(crate::lease_millis);
        let sql = &self.board.sql;
        let version = run!(self, |c| <D::Database as BoardDriver>::board_write(
            c, sql, key, value, condition, ttl
        ))
        .map_err(|e| self.board_error(key, e))?;
        version
            .map(|version| {
                u64::try_from(version).map_err(|_| {
                    Error::store(
                        Operation::Jobs,
                        key,
                        format!("the board table returned a negative version {version}"),
                    )
                })
            })
            .transpose()
    }

    async fn board_remove(&self, key: &str, condition: BoardCondition) -> Result<bool, Error> {
        let sql = &self.board.sql;
        run!(self, |c| <D::Database as BoardDriver>::board_remove(
            c, sql, key, condition
        ))
        .map_err(|e| self.board_error(key, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_prefix_ends_before_the_next_character() {
        assert_eq!(prefix_end("carried/"), Some("carried0".into()));
        assert_eq!(prefix_end("a\u{D7FF}"), Some("a\u{E000}".into()));
        assert_eq!(prefix_end("é"), Some("ê".into()));
        assert_eq!(prefix_end("a\u{10FFFF}"), Some("b".into()));
        assert_eq!(prefix_end("\u{10FFFF}"), None);
        assert_eq!(prefix_end(""), None);
        for (inside, prefix) in [("p/\u{10FFFF}x", "p/"), ("p/", "p/")] {
            let end = prefix_end(prefix).unwrap();
            assert!(inside >= prefix && inside < end.as_str());
        }
        assert!("p0" >= prefix_end("p/").unwrap().as_str());
    }

    /// `sql/<database>.sql` holds what `create_schema` creates for the default board table.
    #[test]
    fn sql_files_hold_the_board_table() {
        #[cfg(feature = "postgres")]
        assert!(
            include_str!("../sql/postgres.sql")
                .contains(&sqlx::Postgres::board_create_sql("shedlock_board"))
        );
        #[cfg(feature = "mysql")]
        assert!(
            include_str!("../sql/mysql.sql")
                .contains(&sqlx::MySql::board_create_sql("shedlock_board"))
        );
        #[cfg(feature = "sqlite")]
        assert!(
            include_str!("../sql/sqlite.sql")
                .contains(&sqlx::Sqlite::board_create_sql("shedlock_board"))
        );
    }

    #[test]
    fn board_tables_sit_beside_the_lock_table() {
        assert_eq!(default_board_table("shedlock"), "shedlock_board");
        assert_eq!(default_board_table("app.locks"), "app.locks_board");
        let long = "a".repeat(63);
        assert!(default_board_table(&long).len() <= 63);
    }
}
