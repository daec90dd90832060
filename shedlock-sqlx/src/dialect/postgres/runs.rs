//! PostgreSQL run records: one upsert to start, one to end, times from `clock_timestamp()`.

use std::time::Duration;

use chrono::NaiveDateTime;
use sqlx::PgPool;

use super::{NOW, Pg, schema_transaction};
use crate::dialect::{RunDialect, RunStatements, runs::aligned_run_table_sql};
use crate::runs::{RUN_COLUMNS, RUN_KEY, RunTable};
use crate::{Dialect, lease_millis, trusted_sql};

/// The run records of Pg.
#[doc(hidden)]
#[derive(Debug)]
pub struct PgRuns;

impl RunDialect for PgRuns {
    type Database = sqlx::Postgres;
    type OwnStatements = ();
    type Time = Option<NaiveDateTime>;
    /// In milliseconds.
    type Retention = i64;

    fn time(time: Option<NaiveDateTime>) -> Option<NaiveDateTime> {
        time
    }

    fn retention(retention: Duration) -> i64 {
        lease_millis(retention)
    }

    /// `$1`-`$6` the run (`$7`, `$8` its end), and `$1`-`$3` the query or the trim.
    fn statements(table: &RunTable) -> RunStatements {
        let (r, key) = (&table.name, RUN_KEY);
        RunStatements {
            // The no-op update makes RETURNING give an existing row too.
            started: trusted_sql(format!(
                "INSERT INTO {r} AS r ({key}, job, tick, holder, started_at, outcome) \
                 VALUES ($1, $2, $3, $4, $5, $6, {NOW}, 'running') \
                 ON CONFLICT ({key}) DO UPDATE SET lock_name = r.lock_name RETURNING {RUN_COLUMNS}"
            )),
            finished: trusted_sql(format!(
                "INSERT INTO {r} AS r ({key}, job, tick, holder, started_at, finished_at, outcome, error) \
                 SELECT $1, $2, $3, $4, $5, $6, db.now, db.now, $7, $8 FROM (SELECT {NOW} AS now) AS db \
                 ON CONFLICT ({key}) DO UPDATE SET finished_at = EXCLUDED.finished_at, \
                 outcome = EXCLUDED.outcome, error = EXCLUDED.error WHERE r.outcome = 'running'"
            )),
            list: trusted_sql(format!(
                "SELECT {RUN_COLUMNS} FROM {r} \
                 WHERE ($1::text IS NULL OR lock_name = $1) \
                 AND ($2::timestamp IS NULL OR started_at >= $2) \
                 ORDER BY started_at DESC, fencing_token DESC, attempt DESC LIMIT $3"
            )),
            trim: trusted_sql(format!(
                "DELETE FROM {r} WHERE (lock_name = $1 AND started_at < (SELECT started_at FROM {r} \
                 WHERE lock_name = $1 ORDER BY started_at DESC OFFSET $2 LIMIT 1)) \
                 OR started_at < {NOW} - $3 * INTERVAL '1 millisecond'"
            )),
            own: (),
        }
    }

    fn create_sql(table: &RunTable) -> String {
        let r = &table.name;
        let index = format!("{}_started", r.replace('.', "_"));
        let index = format!("CREATE INDEX IF NOT EXISTS {index} ON {r} (started_at);");
        aligned_run_table_sql(r, &Pg::COLUMN_TYPES, &index)
    }

    /// Under the same advisory lock as the lock table's creation: concurrent `CREATE TABLE IF NOT
    /// EXISTS` of one name can fail in PostgreSQL's catalog (`pg_type`'s unique index).
    async fn create(pool: &PgPool, table: &RunTable) -> Result<(), sqlx::Error> {
        let mut tx = schema_transaction(pool).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(Self::create_sql(table)))
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }
}
