//! MySQL and MariaDB run records: `INSERT IGNORE` and a read to start, one
//! `INSERT … ON DUPLICATE KEY UPDATE` to end, times from `UTC_TIMESTAMP(3)`.

use chrono::NaiveDateTime;
use sqlx::{MySqlConnection, MySqlPool, SqlStr};

use super::{MySql, NOW};
use crate::dialect::RunDialect;
use crate::runs::{RUN_COLUMNS, RunArgs, RunRow, RunTable};
use crate::{ColumnTypes, Dialect, lease_millis, trusted_sql};

/// The run statements of one provider.
#[doc(hidden)]
#[derive(Debug)]
pub struct RunStatements {
    /// lock, token, attempt, job, tick, holder: nothing when the row exists.
    start: SqlStr,
    /// lock, token, attempt: the row.
    read: SqlStr,
    /// lock, token, attempt, job, tick, holder, outcome, error.
    finished: SqlStr,
    /// lock, lock, since, since, limit.
    list: SqlStr,
    /// lock, lock, rows kept.
    trim_lock: SqlStr,
    /// retention in µs.
    trim_old: SqlStr,
}

/// The run records of MySql.
#[doc(hidden)]
#[derive(Debug)]
pub struct MySqlRuns;

impl RunDialect for MySqlRuns {
    type Database = sqlx::MySql;
    type Statements = RunStatements;

    fn statements(table: &RunTable) -> RunStatements {
        let r = &table.name;
        let key = "lock_name, fencing_token, attempt";
        // Assignments read `outcome` before it is assigned last, so they mean the same whether
        // they see old or new values (MariaDB's SIMULTANEOUS_ASSIGNMENT).
        let running = "outcome = 'running'";
        RunStatements {
            start: trusted_sql(format!(
                "INSERT IGNORE INTO {r} ({key}, job, tick, holder, started_at, outcome) \
                 VALUES (?, ?, ?, ?, ?, ?, {NOW}, 'running')"
            )),
            read: trusted_sql(format!(
                "SELECT {RUN_COLUMNS} FROM {r} WHERE lock_name = ? AND fencing_token = ? AND attempt = ?"
            )),
            finished: trusted_sql(format!(
                "INSERT INTO {r} ({key}, job, tick, holder, started_at, finished_at, outcome, error) \
                 VALUES (?, ?, ?, ?, ?, ?, {NOW}, {NOW}, ?, ?) ON DUPLICATE KEY UPDATE \
                 finished_at = IF({running}, VALUES(finished_at), finished_at), \
                 error = IF({running}, VALUES(error), error), \
                 outcome = IF({running}, VALUES(outcome), outcome)"
            )),
            list: trusted_sql(format!(
                "SELECT {RUN_COLUMNS} FROM {r} WHERE (? IS NULL OR lock_name = ?) \
                 AND (? IS NULL OR started_at >= ?) \
                 ORDER BY started_at DESC, fencing_token DESC, attempt DESC LIMIT ?"
            )),
            // The inner select is materialised first: MySQL refuses a subquery reading the table
            // a DELETE writes.
            trim_lock: trusted_sql(format!(
                "DELETE FROM {r} WHERE lock_name = ? AND started_at < (SELECT started_at FROM \
                 (SELECT started_at FROM {r} WHERE lock_name = ? ORDER BY started_at DESC \
                 LIMIT 1 OFFSET ?) AS kept)"
            )),
            trim_old: trusted_sql(format!(
                "DELETE FROM {r} WHERE started_at < {NOW} - INTERVAL ? MICROSECOND"
            )),
        }
    }

    fn create_sql(table: &RunTable) -> String {
        let ColumnTypes { name, time, .. } = MySql::COLUMN_TYPES;
        format!(
            "CREATE TABLE IF NOT EXISTS {r} (\n    \
             lock_name     {name} NOT NULL,\n    \
             fencing_token BIGINT NOT NULL,\n    \
             attempt       INTEGER NOT NULL,\n    \
             job           VARCHAR(255) NOT NULL,\n    \
             tick          {time} NULL,\n    \
             holder        VARCHAR(255) NOT NULL,\n    \
             started_at    {time} NOT NULL,\n    \
             finished_at   {time} NULL,\n    \
             outcome       VARCHAR(16) NOT NULL,\n    \
             error         VARCHAR(2000) CHARACTER SET utf8mb4 NULL,\n    \
             PRIMARY KEY (lock_name, fencing_token, attempt),\n    \
             INDEX (started_at)\n);",
            r = table.name
        )
    }

    async fn started(
        connection: &mut MySqlConnection,
        sql: &RunStatements,
        args: RunArgs<'_>,
    ) -> Result<RunRow, sqlx::Error> {
        sqlx::query(sql.start.clone())
            .bind(args.lock)
            .bind(args.token)
            .bind(args.attempt)
            .bind(args.job)
            .bind(args.tick)
            .bind(args.holder)
            .execute(&mut *connection)
            .await?;
        sqlx::query_as(sql.read.clone())
            .bind(args.lock)
            .bind(args.token)
            .bind(args.attempt)
            .fetch_one(connection)
            .await
    }

    async fn finished(
        connection: &mut MySqlConnection,
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
        pool: &MySqlPool,
        sql: &RunStatements,
        lock: Option<&str>,
        since: Option<NaiveDateTime>,
        limit: i64,
    ) -> Result<Vec<RunRow>, sqlx::Error> {
        sqlx::query_as(sql.list.clone())
            .bind(lock)
            .bind(lock)
            .bind(since)
            .bind(since)
            .bind(limit)
            .fetch_all(pool)
            .await
    }

    async fn trim(
        pool: &MySqlPool,
        sql: &RunStatements,
        table: &RunTable,
        lock: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(sql.trim_lock.clone())
            .bind(lock)
            .bind(lock)
            .bind(i64::from(table.per_lock))
            .execute(pool)
            .await?;
        sqlx::query(sql.trim_old.clone())
            .bind(lease_millis(table.retention) * 1000)
            .execute(pool)
            .await
            .map(drop)
    }

    async fn create(pool: &MySqlPool, table: &RunTable) -> Result<(), sqlx::Error> {
        sqlx::query(trusted_sql(Self::create_sql(table)))
            .execute(pool)
            .await
            .map(drop)
    }
}
