//! SQLite run records: one upsert to start, one to end, read to their ends (`single`), times
//! as text from `'now'`.

use chrono::NaiveDateTime;
use sqlx::{SqlStr, SqliteConnection, SqlitePool};

use super::FORMAT;
use crate::dialect::RunDialect;
use crate::runs::{RUN_COLUMNS, RunArgs, RunRow, RunTable};
use crate::{single, trusted_sql};

/// The run statements of one provider.
#[doc(hidden)]
#[derive(Debug)]
pub struct RunStatements {
    /// `?1`-`?6` lock, token, attempt, job, tick, holder: the row.
    started: SqlStr,
    /// `?1`-`?6` as `started`, `?7` outcome, `?8` error.
    finished: SqlStr,
    /// `?1` lock or NULL, `?2` since or NULL, `?3` limit.
    list: SqlStr,
    /// `?1` lock, `?2` rows kept, `?3` retention as a negative modifier.
    trim: SqlStr,
}

/// A time as the run table holds it: text in the lock table's format.
fn text(time: Option<NaiveDateTime>) -> Option<String> {
    time.map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
}

/// The run records of Sqlite.
#[doc(hidden)]
#[derive(Debug)]
pub struct SqliteRuns;

impl RunDialect for SqliteRuns {
    type Database = sqlx::Sqlite;
    type Statements = RunStatements;

    fn statements(table: &RunTable) -> RunStatements {
        let r = &table.name;
        let key = "lock_name, fencing_token, attempt";
        let now = format!("strftime({FORMAT}, 'now')");
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
        }
    }

    fn create_sql(table: &RunTable) -> String {
        let r = &table.name;
        let (schema, bare) = match r.split_once('.') {
            Some((schema, bare)) => (format!("{schema}."), bare),
            None => (String::new(), r.as_str()),
        };
        format!(
            "CREATE TABLE IF NOT EXISTS {r} (\n    \
             lock_name     VARCHAR(64)   NOT NULL,\n    \
             fencing_token INTEGER       NOT NULL,\n    \
             attempt       INTEGER       NOT NULL,\n    \
             job           VARCHAR(255)  NOT NULL,\n    \
             tick          TEXT,\n    \
             holder        VARCHAR(255)  NOT NULL,\n    \
             started_at    TEXT          NOT NULL,\n    \
             finished_at   TEXT,\n    \
             outcome       VARCHAR(16)   NOT NULL,\n    \
             error         VARCHAR(2000),\n    \
             PRIMARY KEY (lock_name, fencing_token, attempt)\n);\n\
             CREATE INDEX IF NOT EXISTS {schema}{bare}_started ON {bare} (started_at);"
        )
    }

    async fn started(
        connection: &mut SqliteConnection,
        sql: &RunStatements,
        args: RunArgs<'_>,
    ) -> Result<RunRow, sqlx::Error> {
        let rows = sqlx::query_as(sql.started.clone())
            .bind(args.lock)
            .bind(args.token)
            .bind(args.attempt)
            .bind(args.job)
            .bind(text(args.tick))
            .bind(args.holder)
            .fetch_all(connection)
            .await?;
        single(rows)?.ok_or_else(|| sqlx::Error::Protocol("the run upsert returned no row".into()))
    }

    async fn finished(
        connection: &mut SqliteConnection,
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
            .bind(text(args.tick))
            .bind(args.holder)
            .bind(outcome)
            .bind(error)
            .execute(connection)
            .await
            .map(drop)
    }

    async fn list(
        pool: &SqlitePool,
        sql: &RunStatements,
        lock: Option<&str>,
        since: Option<NaiveDateTime>,
        limit: i64,
    ) -> Result<Vec<RunRow>, sqlx::Error> {
        sqlx::query_as(sql.list.clone())
            .bind(lock)
            .bind(text(since))
            .bind(limit)
            .fetch_all(pool)
            .await
    }

    async fn trim(
        pool: &SqlitePool,
        sql: &RunStatements,
        table: &RunTable,
        lock: &str,
    ) -> Result<(), sqlx::Error> {
        let millis = crate::lease_millis(table.retention);
        sqlx::query(sql.trim.clone())
            .bind(lock)
            .bind(i64::from(table.per_lock))
            .bind(format!("-{}.{:03} seconds", millis / 1000, millis % 1000))
            .execute(pool)
            .await
            .map(drop)
    }

    async fn create(pool: &SqlitePool, table: &RunTable) -> Result<(), sqlx::Error> {
        sqlx::raw_sql(sqlx::AssertSqlSafe(Self::create_sql(table)))
            .execute(pool)
            .await
            .map(drop)
    }
}
