//! Turning sqlx errors into `Error::Store`, with a hint when the table is missing or old.

use std::fmt;

use shedlock_core::{Error, Operation};

use crate::Table;

/// Wraps a database error as [`Error::Store`], explaining a missing table or column.
pub(crate) fn store_error(
    operation: Operation,
    lock_name: &str,
    table: &Table,
    error: sqlx::Error,
) -> Error {
    match SchemaProblem::of(&error, table) {
        Some(problem) => Error::store(
            operation,
            lock_name,
            SchemaError {
                table: table.name.clone(),
                problem,
                source: error,
            },
        ),
        None => Error::store(operation, lock_name, DatabaseFailure(error)),
    }
}

/// A sqlx error as a store error shows it: a database's own error as its message and SQLSTATE,
/// without the driver's decorations (sqlx prints PostgreSQL's `at line 3665`, the line of the
/// server's C source that raised it, which says nothing to a user).
#[derive(Debug)]
struct DatabaseFailure(sqlx::Error);

impl DatabaseFailure {
    /// The driver's error as the next in the chain, except a database's own error, whose
    /// message and code the `Display` already carries.
    fn source_of(error: &sqlx::Error) -> Option<&(dyn std::error::Error + 'static)> {
        match error.as_database_error() {
            Some(_) => None,
            None => Some(error),
        }
    }

    /// A database's own error as its message and SQLSTATE; any other error as sqlx says it.
    fn display(error: &sqlx::Error) -> String {
        match error.as_database_error() {
            Some(database) => match database.code() {
                Some(code) => format!("{} (SQLSTATE {code})", database.message()),
                None => database.message().to_owned(),
            },
            None => error.to_string(),
        }
    }
}

impl fmt::Display for DatabaseFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_database_error() {
            Some(_) => write!(f, "the database refused: {}", Self::display(&self.0)),
            None => self.0.fmt(f),
        }
    }
}

impl std::error::Error for DatabaseFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        DatabaseFailure::source_of(&self.0)
    }
}

#[derive(Debug)]
enum SchemaProblem {
    MissingTable,
    /// A column is missing: one of those `create_schema` adds, with its definition, when the
    /// database's message names it.
    MissingColumn(Option<(String, String)>),
}

impl SchemaProblem {
    fn of(error: &sqlx::Error, table: &Table) -> Option<Self> {
        let database = error.as_database_error()?;
        let message = database.message();
        // SQLSTATEs of PostgreSQL (42P01, 42703) and MySQL/MariaDB (42S02, 42S22); SQLite only
        // has a generic code, so its messages are matched.
        let missing_column = match database.code().as_deref() {
            Some("42P01" | "42S02") => return Some(SchemaProblem::MissingTable),
            Some("42703" | "42S22") => true,
            _ if message.starts_with("no such table") => return Some(SchemaProblem::MissingTable),
            _ => message.starts_with("no such column") || message.contains("has no column named"),
        };
        missing_column.then(|| SchemaProblem::MissingColumn(added_column_named(message, table)))
    }
}

/// The column `create_schema` adds that a database's "no such column" `message` names
/// (`column "last_tick" of relation …`, `Unknown column 'l.last_tick' …`, `no such column:
/// l.last_tick`), with its definition. BIGINT is an integer column in every dialect.
fn added_column_named(message: &str, table: &Table) -> Option<(String, String)> {
    let words = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty());
    let (column, definition) = table
        .added_columns("BIGINT")
        .into_iter()
        .find(|(column, _)| words.clone().any(|word| word.eq_ignore_ascii_case(column)))?;
    Some((column.to_owned(), definition))
}

/// A database error caused by the lock table's shape, with what to do about it.
#[derive(Debug)]
struct SchemaError {
    table: String,
    problem: SchemaProblem,
    source: sqlx::Error,
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let table = &self.table;
        match &self.problem {
            SchemaProblem::MissingTable => write!(
                f,
                "lock table `{table}` does not exist; create it with `create_schema()` \
                 or the DDL in the shedlock-sqlx docs ({})",
                DatabaseFailure::display(&self.source)
            ),
            SchemaProblem::MissingColumn(Some((column, definition))) => write!(
                f,
                "lock table `{table}` lacks a column, `{column}`: `create_schema()` adds it, \
                 or `ALTER TABLE {table} ADD COLUMN {column} {definition}` ({})",
                DatabaseFailure::display(&self.source)
            ),
            SchemaProblem::MissingColumn(None) => write!(
                f,
                "lock table `{table}` lacks a column (a table made by ShedLock or an earlier \
                 version lacks those `create_schema()` adds) ({})",
                DatabaseFailure::display(&self.source)
            ),
        }
    }
}

impl std::error::Error for SchemaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        DatabaseFailure::source_of(&self.source)
    }
}
