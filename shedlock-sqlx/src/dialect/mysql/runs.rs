//! MySQL and MariaDB run records: `INSERT IGNORE` and a read to start (the read also says
//! whether a trim is due; when one is, its `DELETE` follows), one
//! `INSERT … ON DUPLICATE KEY UPDATE` to end, one `UPDATE` per heartbeat; times from
//! `UTC_TIMESTAMP(3)`.

use std::time::Duration;

use chrono::NaiveDateTime;
use std::collections::HashSet;

use sqlx::mysql::MySqlArguments;
use sqlx::{MySql as MySqlDb, MySqlConnection, MySqlPool, SqlStr};

use super::batch::add;
use super::{MySql, NOW, mysql_error_number, schema_and_name};
use crate::dialect::runs::{
    AGED_BATCH, NEWEST_FIRST, RUN_INDEXES, TRIM_BATCH, Trims, deletable, page_sql, run_trims,
};
use crate::dialect::{Driver, Ending, RunDialect, RunStatements};
use crate::runs::{Page, RUN_COLUMNS, RUN_KEY, RunArgs, RunRow, RunTable};
use crate::{ColumnTypes, Dialect, Table, lease_millis, trusted_sql};

/// `ALTER TABLE … ADD INDEX` of a name the table has.
const ER_DUP_KEYNAME: u16 = 1061;
/// `ALTER TABLE … DROP INDEX` of a name the table does not have.
const ER_CANT_DROP_FIELD_OR_KEY: u16 = 1091;

/// The index names of a table (schema or the connection's database, table).
const INDEX_NAMES: &str = "SELECT DISTINCT index_name FROM information_schema.statistics \
     WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?";

/// The index on `started_at` alone that tables made before [`RUN_INDEXES`] have (MySQL names an
/// unnamed index after its first column).
const REPLACED_INDEX: &str = "started_at";

/// The run statements only MySQL has: where the others return a row from a write, it needs a
/// second statement.
#[doc(hidden)]
#[derive(Debug)]
pub struct MySqlRunStatements {
    /// lock, lock, token, attempt: the row `started` wrote (or found), then whether the lock is
    /// more than `TRIM_BATCH` rows over and whether a row is past the retention.
    read: SqlStr,
    /// `started` with `{values}` in place of its one row of values.
    started_many: String,
    /// `finished` with `{values}` in place of its one row of values.
    finished_many: String,
    /// `read` of `{keys}` (one `(?, ?, ?)` per run): each run's row and flags.
    read_many: String,
}

/// A run's key and start as its statements bind them: lock, token, attempt, job, tick, holder.
fn add_run(arguments: &mut MySqlArguments, run: &RunArgs<'_>) -> Result<(), sqlx::Error> {
    add(arguments, run.lock)?;
    add(arguments, run.token)?;
    add(arguments, run.attempt)?;
    add(arguments, run.job)?;
    add(arguments, run.tick)?;
    add(arguments, run.holder)
}

/// The run records of MySql.
#[doc(hidden)]
#[derive(Debug)]
pub struct MySqlRuns;

/// [`RunRow`] and the two trims' flags.
type ReadRow = (
    String,
    i64,
    i32,
    String,
    Option<NaiveDateTime>,
    String,
    NaiveDateTime,
    Option<NaiveDateTime>,
    String,
    Option<String>,
    i64,
    i64,
);

impl RunDialect for MySqlRuns {
    type Database = MySqlDb;
    type OwnStatements = MySqlRunStatements;
    type Time = Option<NaiveDateTime>;
    /// In microseconds.
    type Lease = i64;

    const PRECISION: Duration = Duration::from_millis(1);

    fn time(time: Option<NaiveDateTime>) -> Option<NaiveDateTime> {
        time
    }

    fn lease(lease: Duration) -> i64 {
        lease_millis(lease) * 1000
    }

    /// `started` binds the run and its lease (µs) or NULL, writes nothing when the row exists
    /// and returns none (`read` does); `alive` binds the lease, then the run's key; `list_lock`
    /// the lock, then (as `list_all`) the page as `page_sql` says; the per-lock trim binds the
    /// lock twice.
    fn statements(table: &RunTable) -> RunStatements<MySqlRunStatements> {
        let (r, key) = (&table.name, RUN_KEY);
        let cutoff = format!(
            "{NOW} - INTERVAL {} MICROSECOND",
            lease_millis(table.retention) * 1000
        );
        let deletable = deletable("", NOW);
        let over = format!(
            "(SELECT started_at FROM {r} WHERE lock_name = ? ORDER BY {NEWEST_FIRST} \
             LIMIT 1 OFFSET {}) IS NOT NULL",
            table.per_lock + TRIM_BATCH
        );
        let over_each = format!(
            "(SELECT started_at FROM {r} AS x WHERE x.lock_name = o.lock_name \
             ORDER BY x.started_at DESC, x.fencing_token DESC, x.attempt DESC \
             LIMIT 1 OFFSET {}) IS NOT NULL",
            table.per_lock + TRIM_BATCH
        );
        let aged =
            format!("EXISTS (SELECT 1 FROM {r} WHERE started_at < {cutoff} AND {deletable})");
        let page = |across| page_sql(|_| "?".to_owned(), "lock_name", across);
        // Assignments read `outcome` before it is assigned last, so they mean the same whether
        // they see old or new values (MariaDB's SIMULTANEOUS_ASSIGNMENT).
        let running = "outcome = 'running'";
        RunStatements {
            started: trusted_sql(format!(
                "INSERT IGNORE INTO {r} ({key}, job, tick, holder, started_at, finished_at, outcome) \
                 VALUES (?, ?, ?, ?, ?, ?, {NOW}, {NOW} + INTERVAL ? MICROSECOND, 'running')"
            )),
            finished: trusted_sql(format!(
                "INSERT INTO {r} ({key}, job, tick, holder, started_at, finished_at, outcome, error) \
                 VALUES (?, ?, ?, ?, ?, ?, {NOW}, {NOW}, ?, ?) ON DUPLICATE KEY UPDATE \
                 finished_at = IF({running}, VALUES(finished_at), finished_at), \
                 error = IF({running}, VALUES(error), error), \
                 outcome = IF({running}, VALUES(outcome), outcome)"
            )),
            alive: trusted_sql(format!(
                "UPDATE {r} SET finished_at = {NOW} + INTERVAL ? MICROSECOND \
                 WHERE lock_name = ? AND fencing_token = ? AND attempt = ? \
                 AND outcome = 'running' AND (finished_at IS NULL OR finished_at > {NOW})"
            )),
            list_lock: trusted_sql(format!(
                "SELECT {RUN_COLUMNS} FROM {r} WHERE lock_name = ? AND {}",
                page(false)
            )),
            list_all: trusted_sql(format!(
                "SELECT {RUN_COLUMNS} FROM {r} WHERE {}",
                page(true)
            )),
            trims: Some(Trims {
                due: trusted_sql(format!("SELECT {over}, {aged}")),
                // The inner select is materialised first (a derived table with a LIMIT is
                // never merged): MySQL refuses a subquery reading the table a DELETE writes.
                per_lock: trusted_sql(format!(
                    "DELETE FROM {r} WHERE lock_name = ? \
                     AND (started_at, fencing_token, attempt) <= (SELECT started_at, \
                     fencing_token, attempt FROM (SELECT started_at, fencing_token, attempt \
                     FROM {r} WHERE lock_name = ? ORDER BY {NEWEST_FIRST} LIMIT 1 OFFSET {}) \
                     AS kept) AND {deletable}",
                    table.per_lock
                )),
                aged: trusted_sql(format!(
                    "DELETE FROM {r} WHERE started_at < {cutoff} AND {deletable} \
                     ORDER BY started_at LIMIT {AGED_BATCH}"
                )),
            }),
            own: MySqlRunStatements {
                read: trusted_sql(format!(
                    "SELECT {RUN_COLUMNS}, {over}, {aged} FROM {r} \
                     WHERE lock_name = ? AND fencing_token = ? AND attempt = ?"
                )),
                started_many: format!(
                    "INSERT IGNORE INTO {r} ({key}, job, tick, holder, started_at, finished_at, \
                     outcome) VALUES {{values}}"
                ),
                finished_many: format!(
                    "INSERT INTO {r} ({key}, job, tick, holder, started_at, finished_at, outcome, \
                     error) VALUES {{values}} ON DUPLICATE KEY UPDATE \
                     finished_at = IF({running}, VALUES(finished_at), finished_at), \
                     error = IF({running}, VALUES(error), error), \
                     outcome = IF({running}, VALUES(outcome), outcome)"
                ),
                read_many: format!(
                    "SELECT {RUN_COLUMNS}, {over_each}, {aged} FROM {r} AS o \
                     WHERE (lock_name, fencing_token, attempt) IN ({{keys}})"
                ),
            },
        }
    }

    fn create_sql(table: &RunTable) -> String {
        let ColumnTypes { name, time, .. } = MySql::COLUMN_TYPES;
        let indexes: String = RUN_INDEXES
            .iter()
            .map(|(index, columns)| format!(",\n    INDEX {index} ({columns})"))
            .collect();
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
             PRIMARY KEY (lock_name, fencing_token, attempt){indexes}\n);",
            r = table.name
        )
    }

    async fn started(
        connection: &mut MySqlConnection,
        sql: &RunStatements<MySqlRunStatements>,
        args: RunArgs<'_>,
    ) -> Result<RunRow, sqlx::Error> {
        let lease = args.lease.map(Self::lease);
        let run = MySqlDb::start_arguments(&args, args.tick, lease)?;
        MySqlDb::execute(&mut *connection, &sql.started, run).await?;
        let read: ReadRow = sqlx::query_as(sql.own.read.clone())
            .bind(args.lock)
            .bind(args.lock)
            .bind(args.token)
            .bind(args.attempt)
            .fetch_one(&mut *connection)
            .await?;
        let (l, t, a, j, tick, h, s, f, o, e, over, aged) = read;
        if let Some(trims) = &sql.trims {
            run_trims::<MySqlDb>(connection, trims, args.lock, (over, aged), 2).await;
        }
        Ok((l, t, a, j, tick, h, s, f, o, e))
    }

    /// As many as the acquire batch.
    const MAX_BATCH: usize = 1000;

    /// One multi-row `INSERT IGNORE` and one read of the rows (with each lock's trim flag),
    /// then the trims that are due.
    async fn started_many(
        connection: &mut MySqlConnection,
        sql: &RunStatements<MySqlRunStatements>,
        runs: &[RunArgs<'_>],
    ) -> Result<Vec<RunRow>, sqlx::Error> {
        let values =
            vec![
                format!("(?, ?, ?, ?, ?, ?, {NOW}, {NOW} + INTERVAL ? MICROSECOND, 'running')");
                runs.len()
            ];
        let mut arguments = MySqlArguments::default();
        for run in runs {
            add_run(&mut arguments, run)?;
            add(&mut arguments, run.lease.map(Self::lease))?;
        }
        let insert = trusted_sql(sql.own.started_many.replace("{values}", &values.join(", ")));
        sqlx::query_with(insert, arguments)
            .execute(&mut *connection)
            .await?;
        let mut arguments = MySqlArguments::default();
        for run in runs {
            add(&mut arguments, run.lock)?;
            add(&mut arguments, run.token)?;
            add(&mut arguments, run.attempt)?;
        }
        let keys = vec!["(?, ?, ?)"; runs.len()].join(", ");
        let read = trusted_sql(sql.own.read_many.replace("{keys}", &keys));
        let rows: Vec<ReadRow> = sqlx::query_as_with(read, arguments)
            .fetch_all(&mut *connection)
            .await?;
        if let Some(trims) = &sql.trims {
            let mut trimmed = HashSet::new();
            for row in rows.iter().filter(|row| row.10 != 0) {
                if trimmed.insert(row.0.as_str()) {
                    run_trims::<MySqlDb>(connection, trims, &row.0, (row.10, 0), 2).await;
                }
            }
            if let Some(row) = rows.iter().find(|row| row.11 != 0) {
                run_trims::<MySqlDb>(connection, trims, &row.0, (0, row.11), 2).await;
            }
        }
        Ok(rows
            .into_iter()
            .map(|(l, t, a, j, tick, h, s, f, o, e, _, _)| (l, t, a, j, tick, h, s, f, o, e))
            .collect())
    }

    /// One multi-row `INSERT … ON DUPLICATE KEY UPDATE`.
    async fn finished_many(
        connection: &mut MySqlConnection,
        sql: &RunStatements<MySqlRunStatements>,
        runs: &[Ending<'_>],
    ) -> Result<(), sqlx::Error> {
        let values = vec![format!("(?, ?, ?, ?, ?, ?, {NOW}, {NOW}, ?, ?)"); runs.len()];
        let mut arguments = MySqlArguments::default();
        for (run, outcome, error) in runs {
            add_run(&mut arguments, run)?;
            add(&mut arguments, *outcome)?;
            add(&mut arguments, *error)?;
        }
        let insert = trusted_sql(
            sql.own
                .finished_many
                .replace("{values}", &values.join(", ")),
        );
        sqlx::query_with(insert, arguments)
            .execute(connection)
            .await
            .map(drop)
    }

    async fn alive(
        connection: &mut MySqlConnection,
        sql: &RunStatements<MySqlRunStatements>,
        args: RunArgs<'_>,
        lease: Duration,
    ) -> Result<bool, sqlx::Error> {
        let done = sqlx::query(sql.alive.clone())
            .bind(Self::lease(lease))
            .bind(args.lock)
            .bind(args.token)
            .bind(args.attempt)
            .execute(connection)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn list(
        pool: &MySqlPool,
        sql: &RunStatements<MySqlRunStatements>,
        lock: Option<&str>,
        page: Page,
    ) -> Result<Vec<RunRow>, sqlx::Error> {
        let query = match lock {
            Some(lock) => sqlx::query_as(sql.list_lock.clone()).bind(lock),
            None => sqlx::query_as(sql.list_all.clone()),
        };
        let (time, token, attempt, after) = page.before;
        // S T T K A T K A C L, as `page_sql` writes them.
        query
            .bind(page.since)
            .bind(time)
            .bind(time)
            .bind(token)
            .bind(attempt)
            .bind(time)
            .bind(token)
            .bind(attempt)
            .bind(after)
            .bind(page.limit)
            .fetch_all(pool)
            .await
    }

    /// A table made before the two indexes gets them (checked first: MySQL has no
    /// `ADD INDEX IF NOT EXISTS`), and loses the one on `started_at` they replace; what another
    /// instance did in between is no error.
    async fn create(pool: &MySqlPool, table: &RunTable) -> Result<(), sqlx::Error> {
        sqlx::query(trusted_sql(Self::create_sql(table)))
            .execute(pool)
            .await?;
        let runs = Table {
            name: table.name.clone(),
            columns: Default::default(),
        };
        let (schema, name) = schema_and_name(&runs);
        let found: Vec<String> = sqlx::query_scalar(INDEX_NAMES)
            .bind(schema)
            .bind(name)
            .fetch_all(pool)
            .await?;
        let has = |index: &str| found.iter().any(|f| f.eq_ignore_ascii_case(index));
        let mut changes = Vec::new();
        for (index, columns) in RUN_INDEXES {
            if !has(index) {
                changes.push((format!("ADD INDEX {index} ({columns})"), ER_DUP_KEYNAME));
            }
        }
        if has(REPLACED_INDEX) {
            let drop = format!("DROP INDEX {REPLACED_INDEX}");
            changes.push((drop, ER_CANT_DROP_FIELD_OR_KEY));
        }
        for (change, done_already) in changes {
            let alter = trusted_sql(format!("ALTER TABLE {} {change}", table.name));
            match sqlx::query(alter).execute(pool).await {
                Err(e) if mysql_error_number(&e) == Some(done_already) => {}
                result => result.map(drop)?,
            }
        }
        Ok(())
    }
}
