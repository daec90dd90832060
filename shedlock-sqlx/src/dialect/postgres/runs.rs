//! PostgreSQL run records: one statement to start (which also trims), one to end, one per
//! heartbeat; times from `clock_timestamp()`.

use std::time::Duration;

use chrono::NaiveDateTime;
use sqlx::error::BoxDynError;
use sqlx::postgres::PgArguments;
use sqlx::{Arguments, PgConnection, PgPool};

use super::{NOW, Pg, schema_transaction};
use crate::dialect::runs::Ending;
use crate::dialect::runs::{
    AGED_BATCH, NEWEST_FIRST, aligned_run_table_sql, create_run_indexes, deletable, page_sql,
    split_schema,
};
use crate::dialect::{RunDialect, RunStatements};
use crate::runs::{RUN_COLUMNS, RUN_KEY, RunArgs, RunRow, RunTable};
use crate::{Dialect, lease_millis, single, trusted_sql};

/// Most rows of its lock a start deletes: one a start at the bound, more after `runs_per_lock`
/// was lowered (the lock then comes down by this many a start).
const PER_LOCK_BATCH: u32 = 16;

/// The run records of Pg.
#[doc(hidden)]
#[derive(Debug)]
pub struct PgRuns;

/// The run columns of a batch, an array each, bound as `$1`-`$6`.
struct Columns<'a> {
    locks: Vec<&'a str>,
    tokens: Vec<i64>,
    attempts: Vec<i32>,
    jobs: Vec<&'a str>,
    ticks: Vec<Option<NaiveDateTime>>,
    holders: Vec<&'a str>,
}

impl<'a> Columns<'a> {
    fn of(runs: impl Iterator<Item = &'a RunArgs<'a>>) -> Self {
        let mut columns = Columns {
            locks: Vec::new(),
            tokens: Vec::new(),
            attempts: Vec::new(),
            jobs: Vec::new(),
            ticks: Vec::new(),
            holders: Vec::new(),
        };
        for run in runs {
            columns.locks.push(run.lock);
            columns.tokens.push(run.token);
            columns.attempts.push(run.attempt);
            columns.jobs.push(run.job);
            columns.ticks.push(run.tick);
            columns.holders.push(run.holder);
        }
        columns
    }

    /// The six arrays as `$1`-`$6`, then what `more` adds.
    fn arguments(
        self,
        more: impl FnOnce(&mut PgArguments) -> Result<(), BoxDynError>,
    ) -> Result<PgArguments, sqlx::Error> {
        let mut arguments = PgArguments::default();
        let add = || -> Result<(), BoxDynError> {
            arguments.add(self.locks)?;
            arguments.add(self.tokens)?;
            arguments.add(self.attempts)?;
            arguments.add(self.jobs)?;
            arguments.add(self.ticks)?;
            arguments.add(self.holders)?;
            more(&mut arguments)
        };
        add().map_err(sqlx::Error::Encode)?;
        Ok(arguments)
    }
}

/// The CTE `batch` of runs bound as arrays: the run columns `$1`-`$6`, then `more` (arrays)
/// named `columns`.
fn batch(more: &str, columns: &str) -> String {
    format!(
        "batch AS (SELECT * FROM unnest($1::text[], $2::bigint[], $3::int[], $4::text[], \
         $5::timestamp[], $6::text[], {more}) AS b(lock_name, fencing_token, attempt, job, tick, \
         holder, {columns}))"
    )
}

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

    /// As many as the acquire batch.
    const MAX_BATCH: usize = 1000;

    /// The statement of a batch, with one run.
    async fn started(
        connection: &mut PgConnection,
        sql: &RunStatements,
        args: RunArgs<'_>,
    ) -> Result<RunRow, sqlx::Error> {
        let rows = Self::started_many(connection, sql, &[args]).await?;
        single(rows)?.ok_or_else(|| sqlx::Error::Protocol("the run upsert returned no row".into()))
    }

    /// The statement of a batch, with one run.
    async fn finished(
        connection: &mut PgConnection,
        sql: &RunStatements,
        args: RunArgs<'_>,
        outcome: &str,
        error: Option<&str>,
    ) -> Result<(), sqlx::Error> {
        Self::finished_many(connection, sql, &[(args, outcome, error)]).await
    }

    async fn started_many(
        connection: &mut PgConnection,
        sql: &RunStatements,
        runs: &[RunArgs<'_>],
    ) -> Result<Vec<RunRow>, sqlx::Error> {
        let leases: Vec<Option<i64>> = runs.iter().map(|run| run.lease.map(lease_millis)).collect();
        let arguments = Columns::of(runs.iter()).arguments(|a| a.add(leases))?;
        sqlx::query_as_with(sql.started.clone(), arguments)
            .fetch_all(connection)
            .await
    }

    async fn finished_many(
        connection: &mut PgConnection,
        sql: &RunStatements,
        runs: &[Ending<'_>],
    ) -> Result<(), sqlx::Error> {
        let outcomes: Vec<&str> = runs.iter().map(|(_, outcome, _)| *outcome).collect();
        let errors: Vec<Option<&str>> = runs.iter().map(|(_, _, error)| *error).collect();
        let arguments = Columns::of(runs.iter().map(|(run, _, _)| run)).arguments(|a| {
            a.add(outcomes)?;
            a.add(errors)
        })?;
        sqlx::query_with(sql.finished.clone(), arguments)
            .execute(connection)
            .await
            .map(drop)
    }

    /// `started` and `finished`: arrays, an element per run (see the statements); `alive`
    /// `$1`-`$3` its key and `$4` the lease; `list_lock` `$1` the lock, then (as
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
            // The runs to start (or end) come as arrays, one element per run (`batch`):
            // `$1` locks, `$2` tokens, `$3` attempts, `$4` jobs, `$5` ticks, `$6` holders,
            // then `$7` leases in milliseconds (start) or `$7` outcomes and `$8` errors (end).
            // One clock reading (`db`) for the starts, the heartbeats and the trims. `trimmed`
            // deletes, for each lock started, its rows past its newest `per_lock` as they were
            // before these starts (the statement's snapshot), newest first and
            // `PER_LOCK_BATCH` at most, found by an index scan down from the first row past
            // them (which stops there, and marks the index entries of rows deleted before as
            // dead, where a bitmap scan of the lock's range would visit each again until
            // vacuum), then by key; `aged` the rows past the retention up to the
            // `AGED_BATCH`th oldest (a row both pick is deleted once). Never a row of these
            // runs (the upsert's), never a run whose heartbeat is live. No `ctid`: CockroachDB
            // has none. The no-op update makes RETURNING give an existing row too.
            started: trusted_sql(format!(
                "WITH db AS (SELECT {NOW} AS now), {batch}, \
                 trimmed AS (DELETE FROM {r} AS o USING (SELECT k.lock_name, k.fencing_token, \
                 k.attempt FROM (SELECT DISTINCT lock_name FROM batch) AS n \
                 CROSS JOIN LATERAL (SELECT k.lock_name, k.fencing_token, k.attempt \
                 FROM {r} AS k WHERE k.lock_name = n.lock_name \
                 AND (k.started_at, k.fencing_token, k.attempt) <= (SELECT started_at, \
                 fencing_token, attempt FROM {r} WHERE lock_name = n.lock_name \
                 ORDER BY {NEWEST_FIRST} OFFSET {per_lock} LIMIT 1) \
                 AND NOT EXISTS (SELECT 1 FROM batch AS s WHERE s.lock_name = k.lock_name \
                 AND s.fencing_token = k.fencing_token AND s.attempt = k.attempt) \
                 AND {k_deletable} ORDER BY {k_newest_first} LIMIT {PER_LOCK_BATCH}) AS k) AS d \
                 WHERE o.lock_name = d.lock_name AND o.fencing_token = d.fencing_token \
                 AND o.attempt = d.attempt), \
                 aged AS (DELETE FROM {r} AS o WHERE o.started_at < {cutoff} \
                 AND o.started_at <= COALESCE((SELECT a.started_at FROM {r} AS a \
                 WHERE a.started_at < {cutoff} ORDER BY a.started_at \
                 OFFSET {aged_last} LIMIT 1), {now}) AND {o_deletable} \
                 AND NOT EXISTS (SELECT 1 FROM batch AS s WHERE s.lock_name = o.lock_name \
                 AND s.fencing_token = o.fencing_token AND s.attempt = o.attempt)) \
                 INSERT INTO {r} AS r ({key}, job, tick, holder, started_at, finished_at, outcome) \
                 SELECT b.lock_name, b.fencing_token, b.attempt, b.job, b.tick, b.holder, \
                 db.now, db.now + {lease}, 'running' FROM batch AS b, db \
                 ON CONFLICT ({key}) DO UPDATE SET lock_name = r.lock_name RETURNING {RUN_COLUMNS}",
                batch = batch("$7::bigint[]", "lease_ms"),
                lease = millis("b.lease_ms"),
            )),
            finished: trusted_sql(format!(
                "WITH {batch} \
                 INSERT INTO {r} AS r ({key}, job, tick, holder, started_at, finished_at, outcome, error) \
                 SELECT b.lock_name, b.fencing_token, b.attempt, b.job, b.tick, b.holder, \
                 db.now, db.now, b.outcome, b.error FROM batch AS b, (SELECT {NOW} AS now) AS db \
                 ON CONFLICT ({key}) DO UPDATE SET finished_at = EXCLUDED.finished_at, \
                 outcome = EXCLUDED.outcome, error = EXCLUDED.error WHERE r.outcome = 'running'",
                batch = batch("$7::text[], $8::text[]", "outcome, error"),
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
