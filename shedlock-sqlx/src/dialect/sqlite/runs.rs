//! SQLite run records: one upsert to start, one to end, read to their ends (`single`), times
//! as text from `'now'`.

use std::time::Duration;

use chrono::NaiveDateTime;
use sqlx::SqlitePool;

use super::{FORMAT, NOW, Sqlite};
use crate::dialect::{RunDialect, RunStatements, runs::aligned_run_table_sql};
use crate::runs::{RUN_COLUMNS, RUN_KEY, RunTable};
use crate::{Dialect, lease_millis, trusted_sql};

/// The run records of Sqlite.
#[doc(hidden)]
#[derive(Debug)]
pub struct SqliteRuns;

impl RunDialect for SqliteRuns {
    type Database = sqlx::Sqlite;
    type OwnStatements = ();
    /// Text in the lock table's format.
    type Time = Option<String>;
    /// A negative date modifier: `-1209600.000 seconds`.
    type Retention = String;

    fn time(time: Option<NaiveDateTime>) -> Option<String> {
        time.map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
    }

    fn retention(retention: Duration) -> String {
        let millis = lease_millis(retention);
        format!("-{}.{:03} seconds", millis / 1000, millis % 1000)
    }

    /// `?1`-`?6` the run (`?7`, `?8` its end), and `?1`-`?3` the query or the trim.
    fn statements(table: &RunTable) -> RunStatements {
        let (r, key, now) = (&table.name, RUN_KEY, NOW);
        RunStatements {
            started: trusted_sql(format!(
                "INSERT INTO {r} AS r ({key}, job, tick, holder, started_at, outcome) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, {now}, 'running') \
                 ON CONFLICT ({key}) DO UPDATE SET lock_name = r.lock_name RETURNING {RUN_COLUMNS}"
            )),
            finished: trusted_sql(format!(
                "INSERT INTO {r} AS r ({key}, job, tick, holder, started_at, finished_at, outcome, error) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, {now}, {now}, ?7, ?8) \
                 ON CONFLICT ({key}) DO UPDATE SET finished_at = excluded.finished_at, \
                 outcome = excluded.outcome, error = excluded.error WHERE r.outcome = 'running'"
            )),
            list: trusted_sql(format!(
                "SELECT {RUN_COLUMNS} FROM {r} WHERE (?1 IS NULL OR lock_name = ?1) \
                 AND (?2 IS NULL OR started_at >= ?2) \
                 ORDER BY started_at DESC, fencing_token DESC, attempt DESC LIMIT ?3"
            )),
            trim: trusted_sql(format!(
                "DELETE FROM {r} WHERE (lock_name = ?1 AND started_at < (SELECT started_at FROM {r} \
                 WHERE lock_name = ?1 ORDER BY started_at DESC LIMIT 1 OFFSET ?2)) \
                 OR started_at < strftime({FORMAT}, 'now', ?3)"
            )),
            own: (),
        }
    }

    fn create_sql(table: &RunTable) -> String {
        let r = &table.name;
        let (schema, bare) = match r.split_once('.') {
            Some((schema, bare)) => (format!("{schema}."), bare),
            None => (String::new(), r.as_str()),
        };
        let index =
            format!("CREATE INDEX IF NOT EXISTS {schema}{bare}_started ON {bare} (started_at);");
        aligned_run_table_sql(r, &Sqlite::COLUMN_TYPES, &index)
    }

    async fn create(pool: &SqlitePool, table: &RunTable) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(Self::create_sql(table)))
            .execute(pool)
            .await
            .map(drop)
    }
}
