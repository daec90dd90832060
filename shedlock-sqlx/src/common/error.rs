//! Turning sqlx errors into `Error::Store`, with a hint when the table is missing or old.

use std::fmt;

use shedlock_core::{Error, Operation};

use super::Table;

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
        None => Error::store(operation, lock_name, error),
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
                self.source
            ),
            SchemaProblem::MissingColumn => write!(
                f,
                "lock table `{table}` lacks a column (a ShedLock table needs `fencing_token`: \
                 `create_schema()` adds it) ({})",
                self.source
            ),
        }
    }
}

impl std::error::Error for SchemaError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}
