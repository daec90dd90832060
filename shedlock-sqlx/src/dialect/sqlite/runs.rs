//! SQLite run records: one upsert to start, read to its end (`single`), then a read of whether
//! a trim is due (no round trip: SQLite runs in the process) and, when one is, its `DELETE`;
//! one upsert to end, one update per heartbeat; times as text from `'now'`.

use std::time::Duration;

use chrono::NaiveDateTime;
use sqlx::SqlitePool;

use super::{FORMAT, NOW, Sqlite};
use crate::dialect::runs::{
    AGED_BATCH, NEWEST_FIRST, TRIM_BATCH, Trims, aligned_run_table_sql, create_run_indexes,
    deletable, page_sql, split_schema,
};
use crate::dialect::{RunDialect, RunStatements};
use crate::runs::{RUN_COLUMNS, RUN_KEY, RunTable};
use crate::{Dialect, lease_millis, trusted_sql};

/// The run records of Sqlite.
#[doc(hidden)]
#[derive(Debug)]
pub struct SqliteRuns;

/// A duration as a date modifier: `+600.000 seconds` (`-` with `sign` '-').
fn modifier(sign: char, duration: Duration) -> String {
    let millis = lease_millis(duration);
    format!("{sign}{}.{:03} seconds", millis / 1000, millis % 1000)
}

impl RunDialect for SqliteRuns {
    type Database = sqlx::Sqlite;
    type OwnStatements = ();
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
    fn statements(table: &RunTable) -> RunStatements {
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
            own: (),
        }
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
