//! PostgreSQL run records: one statement to start (which also trims), one to end, one per
//! heartbeat; times from `clock_timestamp()`.

use std::time::Duration;

use chrono::NaiveDateTime;
use sqlx::PgPool;

use super::{NOW, Pg, schema_transaction};
use crate::dialect::runs::{
    AGED_BATCH, NEWEST_FIRST, aligned_run_table_sql, create_run_indexes, deletable, page_sql,
    split_schema,
};
use crate::dialect::{RunDialect, RunStatements};
use crate::runs::{RUN_COLUMNS, RUN_KEY, RunTable};
use crate::{Dialect, lease_millis, trusted_sql};

/// Most rows of its lock a start deletes: one a start at the bound, more after `runs_per_lock`
/// was lowered (the lock then comes down by this many a start).
const PER_LOCK_BATCH: u32 = 16;

/// The run records of Pg.
#[doc(hidden)]
#[derive(Debug)]
pub struct PgRuns;

/// A duration in milliseconds as SQL (`$n` or a literal): an interval.
fn millis(value: &str) -> String {
    format!("{value} * INTERVAL '1 millisecond'")
}

impl RunDialect for PgRuns {
    type Database = sqlx::Postgres;
    type OwnStatements = ();
    type Time = Option<NaiveDateTime>;
    /// In milliseconds.
    type Lease = i64;

    const PRECISION: Duration = Duration::from_micros(1);

    fn time(time: Option<NaiveDateTime>) -> Option<NaiveDateTime> {
        time
    }

    fn lease(lease: Duration) -> i64 {
        lease_millis(lease)
    }

    /// `$1`-`$6` the run (`started`: `$7` its lease or NULL; `finished`: `$7`, `$8` its end),
    /// `alive` `$1`-`$3` its key and `$4` the lease; `list_lock` `$1` the lock, then (as
    /// `list_all` from `$1`) since, the cursor's time, token, attempt and lock, and the limit.
    fn statements(table: &RunTable) -> RunStatements {
        let (r, key) = (&table.name, RUN_KEY);
        let retention = millis(&lease_millis(table.retention).to_string());
        let per_lock = table.per_lock;
        // The clock as a scalar subquery (an InitPlan: a constant the index scans start
        // from), not a join with `db`, which would leave the planner a scan of every row.
        let now = "(SELECT now FROM db)";
        let k_deletable = deletable("k.", now);
        let o_deletable = deletable("o.", now);
        let cutoff = format!("{now} - {retention}");
        let aged_last = AGED_BATCH - 1;
        let k_newest_first = "k.started_at DESC, k.fencing_token DESC, k.attempt DESC";
        // Numbered from `first`, in the order `page_arguments` binds them.
        let page = |first: usize, across: bool| {
            let param = |name: char| {
                let at = "STKACL".find(name).unwrap_or_default();
                format!("${}", first + at)
            };
            page_sql(param, "lock_name COLLATE \"C\"", across)
        };
        RunStatements {
            // One clock reading (`db`) for the start, the heartbeat and the trims. `trimmed`
            // deletes the lock's rows past its newest `per_lock` as they were before this start
            // (the statement's snapshot), newest first and `PER_LOCK_BATCH` at most, found by
            // an index scan down from the first row past them (which stops there, and marks
            // the index entries of rows deleted before as dead, where a bitmap scan of the
            // lock's range would visit each again until vacuum), then by key; `aged` the rows
            // past the retention up to the `AGED_BATCH`th oldest (a row both pick is deleted
            // once). Never this run's row (the upsert's), never a run whose heartbeat is live.
            // No `ctid`: CockroachDB has none. The no-op update makes RETURNING give an
            // existing row too.
            started: trusted_sql(format!(
                "WITH db AS (SELECT {NOW} AS now), trimmed AS (\
                 DELETE FROM {r} AS o WHERE o.lock_name = $1 \
                 AND (o.fencing_token, o.attempt) IN (SELECT k.fencing_token, k.attempt \
                 FROM {r} AS k WHERE k.lock_name = $1 \
                 AND (k.started_at, k.fencing_token, k.attempt) <= (SELECT started_at, \
                 fencing_token, attempt FROM {r} WHERE lock_name = $1 ORDER BY {NEWEST_FIRST} \
                 OFFSET {per_lock} LIMIT 1) \
                 AND (k.fencing_token, k.attempt) <> ($2, $3) AND {k_deletable} \
                 ORDER BY {k_newest_first} LIMIT {PER_LOCK_BATCH})), \
                 aged AS (DELETE FROM {r} AS o WHERE o.started_at < {cutoff} \
                 AND o.started_at <= COALESCE((SELECT a.started_at FROM {r} AS a \
                 WHERE a.started_at < {cutoff} ORDER BY a.started_at \
                 OFFSET {aged_last} LIMIT 1), {now}) AND {o_deletable} \
                 AND (o.lock_name, o.fencing_token, o.attempt) <> ($1, $2, $3)) \
                 INSERT INTO {r} AS r ({key}, job, tick, holder, started_at, finished_at, outcome) \
                 SELECT $1, $2, $3, $4, $5, $6, db.now, db.now + {lease}, 'running' FROM db \
                 ON CONFLICT ({key}) DO UPDATE SET lock_name = r.lock_name RETURNING {RUN_COLUMNS}",
                lease = millis("$7"),
            )),
            finished: trusted_sql(format!(
                "INSERT INTO {r} AS r ({key}, job, tick, holder, started_at, finished_at, outcome, error) \
                 SELECT $1, $2, $3, $4, $5, $6, db.now, db.now, $7, $8 FROM (SELECT {NOW} AS now) AS db \
                 ON CONFLICT ({key}) DO UPDATE SET finished_at = EXCLUDED.finished_at, \
                 outcome = EXCLUDED.outcome, error = EXCLUDED.error WHERE r.outcome = 'running'"
            )),
            alive: trusted_sql(format!(
                "UPDATE {r} AS r SET finished_at = db.now + {lease} FROM (SELECT {NOW} AS now) AS db \
                 WHERE r.lock_name = $1 AND r.fencing_token = $2 AND r.attempt = $3 \
                 AND r.outcome = 'running' AND (r.finished_at IS NULL OR r.finished_at > db.now)",
                lease = millis("$4"),
            )),
            list_lock: trusted_sql(format!(
                "SELECT {RUN_COLUMNS} FROM {r} WHERE lock_name = $1 AND {}",
                page(2, false)
            )),
            list_all: trusted_sql(format!(
                "SELECT {RUN_COLUMNS} FROM {r} WHERE {}",
                page(1, true)
            )),
            trims: None,
            own: (),
        }
    }

    fn create_sql(table: &RunTable) -> String {
        aligned_run_table_sql(
            &table.name,
            &Pg::COLUMN_TYPES,
            &create_run_indexes(&table.name, false),
        )
    }

    /// Under the same advisory lock as the lock table's creation: concurrent `CREATE TABLE IF NOT
    /// EXISTS` of one name can fail in PostgreSQL's catalog (`pg_type`'s unique index). A table
    /// made before the two indexes gets them, and loses the one on `started_at` they replace.
    async fn create(pool: &PgPool, table: &RunTable) -> Result<(), sqlx::Error> {
        let mut tx = schema_transaction(pool).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(Self::create_sql(table)))
            .execute(&mut *tx)
            .await?;
        let r = &table.name;
        let (schema, _) = split_schema(r);
        let replaced = format!("{schema}{}_started", r.replace('.', "_"));
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP INDEX IF EXISTS {replaced}"
        )))
        .execute(&mut *tx)
        .await?;
        tx.commit().await
    }
}
