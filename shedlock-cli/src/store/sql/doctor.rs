//! `doctor` on SQL: is the lock table usable from here, and if not, what to do about it.

use shedlock_sqlx::{SchemaIssue, SqlLockProvider};

use super::super::target::Target;
use super::pool::OpenPool;
use crate::cli::DbKind;
use crate::doctor::{clock, count_locks};
use crate::failure::{Exit, Failure};

/// The columns `create_schema` adds to a table made by ShedLock, as configured.
#[derive(Debug, Clone, Copy)]
pub(super) struct AddedColumns<'a> {
    pub(super) fencing_token: &'a str,
    pub(super) last_tick: &'a str,
}

/// Prints one line per check (`ok` or `problem`, with how to fix it); exit 5 on any problem.
/// Reaching the database was checked when the pool was opened. `user`: the URL's.
pub(super) async fn run<D: OpenPool>(
    provider: &SqlLockProvider<D>,
    target: &Target,
    user: Option<&str>,
    added: AddedColumns<'_>,
) -> Result<Exit, Failure> {
    let table = provider.table();
    let kind = D::KIND;
    out!("ok       database {} is reachable", target.shown);
    clock(provider, "database").await?;
    let pool: &dyn std::any::Any = provider.pool();
    if let Some(pool) = pool.downcast_ref::<sqlx::PgPool>()
        && crate::doctor::postgres_topology(pool).await?
    {
        return Ok(Exit::Problems);
    }

    let issues = provider.check_schema().await.map_err(Failure::error)?;
    if !issues.is_empty() {
        for issue in &issues {
            out!("problem  {issue}");
            out!("fix      {}", schema_fix(issue, table, added, kind));
        }
        out!(
            "\nThe table the provider expects:\n{}",
            provider.schema_sql()
        );
        return Ok(Exit::Problems);
    }
    out!("ok       table `{table}` has the columns, types and key the provider needs");

    if let Err(e) = provider.check_access().await {
        out!("problem  {e}");
        out!("fix      {}", access_fix(table, kind, user));
        return Ok(Exit::Problems);
    }
    out!("ok       this user may read, insert and update `{table}` (probe rolled back)");

    count_locks(provider).await?;
    Ok(Exit::Ok)
}

/// How to fix one issue, in words and, where one statement does it, that statement.
fn schema_fix(issue: &SchemaIssue, table: &str, added: AddedColumns<'_>, kind: DbKind) -> String {
    match issue {
        SchemaIssue::MissingTable { .. } => {
            "create it: `shedlock schema --apply` with the same options, or the DDL below"
                .to_owned()
        }
        // The statement sqlx's error names too; nullable, so rows written before stay valid.
        SchemaIssue::MissingColumn { column, expected } if column == added.last_tick => format!(
            "ALTER TABLE {table} ADD COLUMN {column} {expected}, or `shedlock schema --apply` \
             with the same options (Java ShedLock instances keep working on the table)"
        ),
        SchemaIssue::MissingColumn { column, .. } if column == added.fencing_token => {
            "`shedlock schema --apply` with the same options adds it (Java ShedLock instances \
             keep working on the table)"
                .to_owned()
        }
        SchemaIssue::MissingColumn { column, expected } => format!(
            "add `{column}` as {expected}, or give the table's own name for it with the \
             matching --name-column, --lock-until-column, … option"
        ),
        SchemaIssue::NotUnique { column } => format!(
            "CREATE UNIQUE INDEX {}_{column}_key ON {table} ({column})",
            table.replace('.', "_")
        ),
        SchemaIssue::WrongType {
            column,
            expected,
            found,
        } => match kind {
            // Keeps the instant a `timestamptz` holds, as the UTC time the statements write.
            DbKind::Postgres if found.contains("with time zone") => format!(
                "ALTER TABLE {table} ALTER COLUMN {column} TYPE {expected} \
                 USING {column} AT TIME ZONE 'UTC'"
            ),
            DbKind::Postgres => {
                format!("ALTER TABLE {table} ALTER COLUMN {column} TYPE {expected}")
            }
            // A plain MODIFY would convert through this session's time zone.
            DbKind::Mysql if found.starts_with("timestamp") => {
                "`shedlock schema --apply` with the same options converts ShedLock's TIMESTAMP \
                 columns to DATETIME(3), keeping the times its instances wrote"
                    .to_owned()
            }
            DbKind::Mysql => format!("ALTER TABLE {table} MODIFY {column} {expected} NOT NULL"),
            DbKind::Sqlite => {
                "SQLite cannot change a column's type: recreate the table as below and copy the \
                 rows over"
                    .to_owned()
            }
        },
        _ => "recreate the table as below".to_owned(),
    }
}

fn access_fix(table: &str, kind: DbKind, user: Option<&str>) -> String {
    match kind {
        DbKind::Sqlite => {
            "make the database file and its directory writable by this user".to_owned()
        }
        DbKind::Postgres | DbKind::Mysql => {
            let user = user.unwrap_or("<user>");
            format!(
                "let the user read and write the table: GRANT SELECT, INSERT, UPDATE ON {table} TO {user}"
            )
        }
    }
}
