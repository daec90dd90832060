//! Checking an existing lock table against what the provider's statements need.

use std::fmt;

use crate::{CatalogColumn, ColumnKind, Dialect, Table};

/// Something about a lock table that stops the provider from working on it, found by
/// [`check_schema`](crate::SqlLockProvider::check_schema). [`Display`](fmt::Display) says what
/// is wrong in plain words.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SchemaIssue {
    /// The table does not exist.
    MissingTable {
        /// The table, as configured.
        table: String,
    },
    /// A column the statements use does not exist.
    MissingColumn {
        /// The column, as configured.
        column: String,
        /// The type `create_schema` gives it.
        expected: &'static str,
    },
    /// The name column is not, alone, the primary key or a unique key: two instances could
    /// insert a row for the same lock and both hold it.
    NotUnique {
        /// The name column, as configured.
        column: String,
    },
    /// A column's type cannot hold what the statements write, or reads back as another type.
    WrongType {
        /// The column, as configured.
        column: String,
        /// Its type, as the database's catalog spells it.
        found: String,
        /// The type `create_schema` gives it.
        expected: &'static str,
    },
}

impl fmt::Display for SchemaIssue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SchemaIssue::MissingTable { table } => write!(f, "table `{table}` does not exist"),
            SchemaIssue::MissingColumn { column, expected } => {
                write!(f, "column `{column}` is missing (expected {expected})")
            }
            SchemaIssue::NotUnique { column } => write!(
                f,
                "column `{column}` is not the primary key (nor unique on its own), so two \
                 instances could hold the same lock"
            ),
            SchemaIssue::WrongType {
                column,
                found,
                expected,
            } => write!(f, "column `{column}` is {found}, expected {expected}"),
        }
    }
}

/// Compares the catalog's columns with the table the statements need.
pub(crate) fn schema_issues<D: Dialect>(
    table: &Table,
    found: &[CatalogColumn],
) -> Vec<SchemaIssue> {
    if found.is_empty() {
        return vec![SchemaIssue::MissingTable {
            table: table.name.clone(),
        }];
    }
    let types = &D::COLUMN_TYPES;
    let c = &table.columns;
    let needed = [
        (&c.name, ColumnKind::Text, types.name),
        (&c.lock_until, ColumnKind::Time, types.time),
        (&c.locked_at, ColumnKind::Time, types.time),
        (&c.locked_by, ColumnKind::Text, "VARCHAR(255)"),
        (&c.fencing_token, ColumnKind::Integer, types.token),
        (&c.last_tick, ColumnKind::Integer, types.token),
    ];
    let mut issues: Vec<SchemaIssue> = needed
        .into_iter()
        .filter_map(|(column, kind, expected)| match find(found, column) {
            None => Some(SchemaIssue::MissingColumn {
                column: column.clone(),
                expected,
            }),
            Some((_, ty, _)) if !D::type_fits(kind, ty) => Some(SchemaIssue::WrongType {
                column: column.clone(),
                found: ty.clone(),
                expected,
            }),
            Some(_) => None,
        })
        .collect();
    if let Some((_, _, false)) = find(found, &c.name) {
        issues.push(SchemaIssue::NotUnique {
            column: c.name.clone(),
        });
    }
    issues
}

/// The catalog's column of this name. Unquoted identifiers: PostgreSQL folds them to lower
/// case, MySQL and SQLite compare column names without regard to case.
fn find<'a>(found: &'a [CatalogColumn], column: &str) -> Option<&'a CatalogColumn> {
    let lower = column.to_lowercase();
    found.iter().find(|(name, _, _)| *name == lower)
}
