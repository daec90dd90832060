//! MySQL and MariaDB run records: `INSERT IGNORE` and a read to start, one
//! `INSERT … ON DUPLICATE KEY UPDATE` to end, times from `UTC_TIMESTAMP(3)`.

use std::time::Duration;

use chrono::NaiveDateTime;
use sqlx::{MySql as MySqlDb, MySqlConnection, MySqlPool, SqlStr};

use super::{MySql, NOW};
use crate::dialect::{Driver, RunDialect, RunStatements};
use crate::runs::{RUN_COLUMNS, RUN_KEY, RunArgs, RunRow, RunTable};
use crate::{ColumnTypes, Dialect, lease_millis, trusted_sql};

/// The run statements only MySQL has: where the others return a row from a write or delete in
/// one statement, it needs a second.
#[doc(hidden)]
#[derive(Debug)]
pub struct MySqlRunStatements {
    /// lock, token, attempt: the row `started` wrote (or found).
    read: SqlStr,
    /// retention in µs: deletes every row past it.
    trim_old: SqlStr,
}

/// The run records of MySql.
#[doc(hidden)]
#[derive(Debug)]
pub struct MySqlRuns;

impl RunDialect for MySqlRuns {
    type Database = MySqlDb;
    type OwnStatements = MySqlRunStatements;
    type Time = Option<NaiveDateTime>;
    /// In microseconds.
    type Retention = i64;

    fn time(time: Option<NaiveDateTime>) -> Option<NaiveDateTime> {
        time
    }

    fn retention(retention: Duration) -> i64 {
        lease_millis(retention) * 1000
    }

    /// `started` writes nothing when the row exists and returns none (`read` does); `list`
    /// binds lock, lock, since, since, limit; `trim` lock, lock, rows kept (the retention goes
    /// to `trim_old`).
    fn statements(table: &RunTable) -> RunStatements<MySqlRunStatements> {
        let (r, key) = (&table.name, RUN_KEY);
        // Assignments read `outcome` before it is assigned last, so they mean the same whether
        // they see old or new values (MariaDB's SIMULTANEOUS_ASSIGNMENT).
        let running = "outcome = 'running'";
        RunStatements {
            started: trusted_sql(format!(
                "INSERT IGNORE INTO {r} ({key}, job, tick, holder, started_at, outcome) \
                 VALUES (?, ?, ?, ?, ?, ?, {NOW}, 'running')"
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
            trim: trusted_sql(format!(
                "DELETE FROM {r} WHERE lock_name = ? AND started_at < (SELECT started_at FROM \
                 (SELECT started_at FROM {r} WHERE lock_name = ? ORDER BY started_at DESC \
                 LIMIT 1 OFFSET ?) AS kept)"
            )),
            own: MySqlRunStatements {
                read: trusted_sql(format!(
                    "SELECT {RUN_COLUMNS} FROM {r} WHERE lock_name = ? AND fencing_token = ? AND attempt = ?"
                )),
                trim_old: trusted_sql(format!(
                    "DELETE FROM {r} WHERE started_at < {NOW} - INTERVAL ? MICROSECOND"
                )),
            },
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
        sql: &RunStatements<MySqlRunStatements>,
        args: RunArgs<'_>,
    ) -> Result<RunRow, sqlx::Error> {
        let run = MySqlDb::run_arguments(&args, args.tick, None)?;
        MySqlDb::execute(&mut *connection, &sql.started, run).await?;
        sqlx::query_as(sql.own.read.clone())
            .bind(args.lock)
            .bind(args.token)
            .bind(args.attempt)
            .fetch_one(connection)
            .await
    }

    async fn list(
        pool: &MySqlPool,
        sql: &RunStatements<MySqlRunStatements>,
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
        sql: &RunStatements<MySqlRunStatements>,
        table: &RunTable,
        lock: &str,
    ) -> Result<(), sqlx::Error> {
        sqlx::query(sql.trim.clone())
            .bind(lock)
            .bind(lock)
            .bind(i64::from(table.per_lock))
            .execute(pool)
            .await?;
        sqlx::query(sql.own.trim_old.clone())
            .bind(Self::retention(table.retention))
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
