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
    match SchemaProblem::of(&error) {
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

#[derive(Debug, Clone, Copy)]
enum SchemaProblem {
    MissingTable,
    MissingColumn,
}

impl SchemaProblem {
    fn of(error: &sqlx::Error) -> Option<Self> {
        let database = error.as_database_error()?;
        // SQLSTATEs of PostgreSQL (42P01, 42703) and MySQL/MariaDB (42S02, 42S22); SQLite only
        // has a generic code, so its messages are matched.
        match database.code().as_deref() {
            Some("42P01" | "42S02") => return Some(SchemaProblem::MissingTable),
            Some("42703" | "42S22") => return Some(SchemaProblem::MissingColumn),
            _ => {}
        }
        let message = database.message();
        if message.starts_with("no such table") {
            Some(SchemaProblem::MissingTable)
        } else if message.starts_with("no such column") || message.contains("has no column named") {
            Some(SchemaProblem::MissingColumn)
        } else {
            None
        }
    }
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
        match self.problem {
            SchemaProblem::MissingTable => write!(
                f,
                "lock table `{table}` does not exist; create it with `create_schema()` \
                 or the DDL in the shedlock-sqlx docs ({})",
                DatabaseFailure::display(&self.source)
            ),
            SchemaProblem::MissingColumn => write!(
                f,
                "lock table `{table}` lacks a column (a ShedLock table needs `fencing_token`: \
                 `create_schema()` adds it) ({})",
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
