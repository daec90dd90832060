//! PostgreSQL run records: one upsert to start, one to end, times from `clock_timestamp()`.

use chrono::NaiveDateTime;
use sqlx::{PgConnection, PgPool, SqlStr};

use super::{NOW, SCHEMA_LOCK_KEY};
use crate::dialect::RunDialect;
use crate::runs::{RUN_COLUMNS, RunArgs, RunRow, RunTable};
use crate::{lease_millis, single, trusted_sql};

/// The run statements of one provider.
#[doc(hidden)]
#[derive(Debug)]
pub struct RunStatements {
    /// `$1`-`$6` lock, token, attempt, job, tick, holder: the row (nothing written when it
    /// exists).
    started: SqlStr,
    /// `$1`-`$6` as `started`, `$7` outcome, `$8` error.
    finished: SqlStr,
    /// `$1` lock or NULL, `$2` since or NULL, `$3` limit.
    list: SqlStr,
    /// `$1` lock, `$2` rows kept, `$3` retention in milliseconds.
    trim: SqlStr,
}

fn bind_start<'q>(
    query: sqlx::query::QueryAs<'q, sqlx::Postgres, RunRow, sqlx::postgres::PgArguments>,
    args: RunArgs<'q>,
) -> sqlx::query::QueryAs<'q, sqlx::Postgres, RunRow, sqlx::postgres::PgArguments> {
    query
        .bind(args.lock)
        .bind(args.token)
        .bind(args.attempt)
        .bind(args.job)
        .bind(args.tick)
        .bind(args.holder)
}

/// The run records of Pg.
#[doc(hidden)]
#[derive(Debug)]
pub struct PgRuns;

impl RunDialect for PgRuns {
    type Database = sqlx::Postgres;
    type Statements = RunStatements;

    fn statements(table: &RunTable) -> RunStatements {
        let r = &table.name;
        let key = "lock_name, fencing_token, attempt";
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
        }
    }

    fn create_sql(table: &RunTable) -> String {
        let r = &table.name;
        let index = format!("{}_started", r.replace('.', "_"));
        format!(
            "CREATE TABLE IF NOT EXISTS {r} (\n    \
             lock_name     VARCHAR(64)   NOT NULL,\n    \
             fencing_token BIGINT        NOT NULL,\n    \
             attempt       INTEGER       NOT NULL,\n    \
             job           VARCHAR(255)  NOT NULL,\n    \
             tick          TIMESTAMP,\n    \
             holder        VARCHAR(255)  NOT NULL,\n    \
             started_at    TIMESTAMP     NOT NULL,\n    \
             finished_at   TIMESTAMP,\n    \
             outcome       VARCHAR(16)   NOT NULL,\n    \
             error         VARCHAR(2000),\n    \
             PRIMARY KEY (lock_name, fencing_token, attempt)\n);\n\
             CREATE INDEX IF NOT EXISTS {index} ON {r} (started_at);"
        )
    }

    async fn started(
        connection: &mut PgConnection,
        sql: &RunStatements,
        args: RunArgs<'_>,
    ) -> Result<RunRow, sqlx::Error> {
        let rows = bind_start(sqlx::query_as(sql.started.clone()), args)
            .fetch_all(connection)
            .await?;
        single(rows)?.ok_or_else(|| sqlx::Error::Protocol("the run upsert returned no row".into()))
    }

    async fn finished(
        connection: &mut PgConnection,
        sql: &RunStatements,
        args: RunArgs<'_>,
        outcome: &str,
        error: Option<&str>,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(sql.finished.clone())
            .bind(args.lock)
            .bind(args.token)
            .bind(args.attempt)
            .bind(args.job)
            .bind(args.tick)
            .bind(args.holder)
            .bind(outcome)
            .bind(error)
            .execute(connection)
            .await
            .map(drop)
    }

    async fn list(
        pool: &PgPool,
        sql: &RunStatements,
        lock: Option<&str>,
        since: Option<NaiveDateTime>,
        limit: i64,
    ) -> Result<Vec<RunRow>, sqlx::Error> {
        sqlx::query_as(sql.list.clone())
            .bind(lock)
            .bind(since)
            .bind(limit)
            .fetch_all(pool)
            .await
    }

    async fn trim(
        pool: &PgPool,
        sql: &RunStatements,
        table: &RunTable,
        lock: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(sql.trim.clone())
            .bind(lock)
            .bind(i64::from(table.per_lock))
            .bind(lease_millis(table.retention))
            .execute(pool)
            .await
            .map(drop)
    }

    /// Under the same advisory lock as the lock table's creation: concurrent `CREATE TABLE IF NOT
    /// EXISTS` of one name can fail in PostgreSQL's catalog (`pg_type`'s unique index).
    async fn create(pool: &PgPool, table: &RunTable) -> Result<(), sqlx::Error> {
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(SCHEMA_LOCK_KEY)
            .execute(&mut *tx)
            .await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(Self::create_sql(table)))
            .execute(&mut *tx)
            .await?;
        tx.commit().await
    }
}
