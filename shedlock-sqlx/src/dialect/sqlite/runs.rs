//! SQLite run records: one upsert to start, read to its end (`single`), then a read of whether
//! a trim is due (no round trip: SQLite runs in the process) and, when one is, its `DELETE`;
//! one upsert to end, one update per heartbeat; times as text from `'now'`.

use std::time::Duration;

use chrono::NaiveDateTime;
use std::collections::HashSet;

use sqlx::sqlite::SqliteArguments;
use sqlx::{Sqlite as SqliteDb, SqliteConnection, SqlitePool};

use super::{FORMAT, NOW, Sqlite};
use crate::dialect::runs::run_trims;
use crate::dialect::runs::{
    AGED_BATCH, NEWEST_FIRST, TRIM_BATCH, Trims, aligned_run_table_sql, create_run_indexes,
    deletable, page_sql, split_schema,
};
use crate::dialect::{Ending, RunDialect, RunStatements};
use crate::runs::{RUN_COLUMNS, RUN_KEY, RunArgs, RunRow, RunTable};
use crate::{Dialect, lease_millis, trusted_sql};

/// Binds a run's key and start: lock, token, attempt, job, tick (text), holder.
fn bind_run<'q, Q: Bind<'q>>(query: Q, run: &RunArgs<'q>) -> Q {
    query
        .push(run.lock)
        .push(run.token)
        .push(run.attempt)
        .push(run.job)
        .push(SqliteRuns::time(run.tick))
        .push(run.holder)
}

/// `bind` on either kind of query (rows or none).
trait Bind<'q> {
    fn push<T: 'q + sqlx::Encode<'q, SqliteDb> + sqlx::Type<SqliteDb>>(self, value: T) -> Self;
}

impl<'q> Bind<'q> for sqlx::query::Query<'q, SqliteDb, SqliteArguments> {
    fn push<T: 'q + sqlx::Encode<'q, SqliteDb> + sqlx::Type<SqliteDb>>(self, value: T) -> Self {
        self.bind(value)
    }
}

impl<'q, O> Bind<'q> for sqlx::query::QueryAs<'q, SqliteDb, O, SqliteArguments> {
    fn push<T: 'q + sqlx::Encode<'q, SqliteDb> + sqlx::Type<SqliteDb>>(self, value: T) -> Self {
        self.bind(value)
    }
}

/// The run records of Sqlite.
#[doc(hidden)]
#[derive(Debug)]
pub struct SqliteRuns;

/// A duration as a date modifier: `+600.000 seconds` (`-` with `sign` '-').
fn modifier(sign: char, duration: Duration) -> String {
    let millis = lease_millis(duration);
    format!("{sign}{}.{:03} seconds", millis / 1000, millis % 1000)
}

/// The run statements only SQLite has: the batches' texts, whose size is their list's.
#[doc(hidden)]
#[derive(Debug)]
pub struct SqliteRunStatements {
    /// `started` with `{values}` in place of its one row of values.
    started_many: String,
    /// `finished` with `{values}` in place of its one row of values.
    finished_many: String,
    /// `{locks}` (one `(?)` per lock): each lock more than `TRIM_BATCH` rows over, then
    /// whether a row is past the retention.
    due_many: String,
}

impl RunDialect for SqliteRuns {
    type Database = sqlx::Sqlite;
    type OwnStatements = SqliteRunStatements;
    /// Text in the lock table's format.
    type Time = Option<String>;
    /// A date modifier: `+30.000 seconds`.
    type Lease = String;

    const PRECISION: Duration = Duration::from_millis(1);

    fn time(time: Option<NaiveDateTime>) -> Option<String> {
        time.map(|t| t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
    }

    fn lease(lease: Duration) -> String {
        modifier('+', lease)
    }

    /// `?1`-`?6` the run (`started`: `?7` its lease or NULL; `finished`: `?7`, `?8` its end),
    /// `alive` `?1`-`?3` its key and `?4` the lease; `list_lock` `?1` the lock, then (as
    /// `list_all` from `?1`) since, the cursor's time, token, attempt and lock, and the limit; the
    /// trims `?1` the lock.
    fn statements(table: &RunTable) -> RunStatements<SqliteRunStatements> {
        let (r, key, now) = (&table.name, RUN_KEY, NOW);
        let cutoff = format!(
            "strftime({FORMAT}, 'now', '{}')",
            modifier('-', table.retention)
        );
        let deletable = deletable("", now);
        let kept_from = |offset: u32| {
            format!(
                "SELECT started_at, fencing_token, attempt FROM {r} WHERE lock_name = ?1 \
                 ORDER BY {NEWEST_FIRST} LIMIT 1 OFFSET {offset}"
            )
        };
        // Numbered from `first`, in the order `page_arguments` binds them.
        let page = |first: usize, across: bool| {
            let param = |name: char| {
                let at = "STKACL".find(name).unwrap_or_default();
                format!("?{}", first + at)
            };
            page_sql(param, "lock_name", across)
        };
        RunStatements {
            // 'now' is read once per statement step: the start and its heartbeat agree.
            started: trusted_sql(format!(
                "INSERT INTO {r} AS r ({key}, job, tick, holder, started_at, finished_at, outcome) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, {now}, strftime({FORMAT}, 'now', ?7), 'running') \
                 ON CONFLICT ({key}) DO UPDATE SET lock_name = r.lock_name RETURNING {RUN_COLUMNS}"
            )),
            finished: trusted_sql(format!(
                "INSERT INTO {r} AS r ({key}, job, tick, holder, started_at, finished_at, outcome, error) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, {now}, {now}, ?7, ?8) \
                 ON CONFLICT ({key}) DO UPDATE SET finished_at = excluded.finished_at, \
                 outcome = excluded.outcome, error = excluded.error WHERE r.outcome = 'running'"
            )),
            alive: trusted_sql(format!(
                "UPDATE {r} SET finished_at = strftime({FORMAT}, 'now', ?4) \
                 WHERE lock_name = ?1 AND fencing_token = ?2 AND attempt = ?3 \
                 AND outcome = 'running' AND (finished_at IS NULL OR finished_at > {now})"
            )),
            list_lock: trusted_sql(format!(
                "SELECT {RUN_COLUMNS} FROM {r} WHERE lock_name = ?1 AND {}",
                page(2, false)
            )),
            list_all: trusted_sql(format!(
                "SELECT {RUN_COLUMNS} FROM {r} WHERE {}",
                page(1, true)
            )),
            trims: Some(Trims {
                due: trusted_sql(format!(
                    "SELECT ({}) IS NOT NULL, EXISTS (SELECT 1 FROM {r} \
                     WHERE started_at < {cutoff} AND {deletable})",
                    kept_from(table.per_lock + TRIM_BATCH).replacen(
                        "started_at, fencing_token, attempt",
                        "started_at",
                        1
                    )
                )),
                per_lock: trusted_sql(format!(
                    "DELETE FROM {r} WHERE lock_name = ?1 \
                     AND (started_at, fencing_token, attempt) <= ({}) AND {deletable}",
                    kept_from(table.per_lock)
                )),
                aged: trusted_sql(format!(
                    "DELETE FROM {r} WHERE rowid IN (SELECT rowid FROM {r} \
                     WHERE started_at < {cutoff} AND {deletable} \
                     ORDER BY started_at LIMIT {AGED_BATCH})"
                )),
            }),
            own: SqliteRunStatements {
                started_many: format!(
                    "INSERT INTO {r} AS r ({key}, job, tick, holder, started_at, finished_at, \
                     outcome) VALUES {{values}} ON CONFLICT ({key}) DO UPDATE SET \
                     lock_name = r.lock_name RETURNING {RUN_COLUMNS}"
                ),
                finished_many: format!(
                    "INSERT INTO {r} AS r ({key}, job, tick, holder, started_at, finished_at, \
                     outcome, error) VALUES {{values}} ON CONFLICT ({key}) DO UPDATE SET \
                     finished_at = excluded.finished_at, outcome = excluded.outcome, \
                     error = excluded.error WHERE r.outcome = 'running'"
                ),
                due_many: format!(
                    "SELECT n.column1, (SELECT started_at FROM {r} WHERE lock_name = n.column1 \
                     ORDER BY {NEWEST_FIRST} LIMIT 1 OFFSET {over}) IS NOT NULL, \
                     EXISTS (SELECT 1 FROM {r} WHERE started_at < {cutoff} AND {deletable}) \
                     FROM (VALUES {{locks}}) AS n",
                    over = table.per_lock + TRIM_BATCH
                ),
            },
        }
    }

    /// As many as a statement's parameters allow with room to spare (7 a run; SQLite's
    /// default limit is 32,766).
    const MAX_BATCH: usize = 1000;

    /// One upsert of every start, one read of which locks are due a trim, then those trims.
    async fn started_many(
        connection: &mut SqliteConnection,
        sql: &RunStatements<SqliteRunStatements>,
        runs: &[RunArgs<'_>],
    ) -> Result<Vec<RunRow>, sqlx::Error> {
        let row = format!("(?, ?, ?, ?, ?, ?, {NOW}, strftime({FORMAT}, 'now', ?), 'running')");
        let values = vec![row; runs.len()].join(", ");
        let mut query = sqlx::query_as::<_, RunRow>(trusted_sql(
            sql.own.started_many.replace("{values}", &values),
        ));
        for run in runs {
            query = bind_run(query, run).bind(run.lease.map(Self::lease));
        }
        let rows = query.fetch_all(&mut *connection).await?;
        if let Some(trims) = &sql.trims {
            let locks: Vec<&str> = {
                let mut seen = HashSet::new();
                runs.iter()
                    .map(|run| run.lock)
                    .filter(|lock| seen.insert(*lock))
                    .collect()
            };
            let marks = vec!["(?)"; locks.len()].join(", ");
            let mut due = sqlx::query_as::<_, (String, i64, i64)>(trusted_sql(
                sql.own.due_many.replace("{locks}", &marks),
            ));
            for lock in &locks {
                due = due.bind(*lock);
            }
            match due.fetch_all(&mut *connection).await {
                Ok(due) => {
                    for (lock, over, _) in due.iter().filter(|(_, over, _)| *over != 0) {
                        run_trims::<SqliteDb>(connection, trims, lock, (*over, 0), 1).await;
                    }
                    if let Some((lock, _, aged)) = due.iter().find(|(_, _, aged)| *aged != 0) {
                        run_trims::<SqliteDb>(connection, trims, lock, (0, *aged), 1).await;
                    }
                }
                Err(error) => tracing::warn!(%error, "reading which run records to delete failed"),
            }
        }
        Ok(rows)
    }

    /// One upsert of every end.
    async fn finished_many(
        connection: &mut SqliteConnection,
        sql: &RunStatements<SqliteRunStatements>,
        runs: &[Ending<'_>],
    ) -> Result<(), sqlx::Error> {
        let values = vec![format!("(?, ?, ?, ?, ?, ?, {NOW}, {NOW}, ?, ?)"); runs.len()].join(", ");
        let mut query = sqlx::query(trusted_sql(
            sql.own.finished_many.replace("{values}", &values),
        ));
        for (run, outcome, error) in runs {
            query = bind_run(query, run).bind(*outcome).bind(*error);
        }
        query.execute(connection).await.map(drop)
    }

    fn create_sql(table: &RunTable) -> String {
        aligned_run_table_sql(
            &table.name,
            &Sqlite::COLUMN_TYPES,
            &create_run_indexes(&table.name, true),
        )
    }

    /// A table made before the two indexes gets them, and loses the one on `started_at` they
    /// replace.
    async fn create(pool: &SqlitePool, table: &RunTable) -> Result<(), sqlx::Error> {
        let (schema, bare) = split_schema(&table.name);
        let sql = format!(
            "{}\nDROP INDEX IF EXISTS {schema}{bare}_started;",
            Self::create_sql(table)
        );
        sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
            .execute(pool)
            .await
            .map(drop)
    }
}
