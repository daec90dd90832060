//! The run records' side of the dialect seam: the statements each dialect writes, and how they
//! run, once for all (MySQL, which cannot return a row from a write, runs its start its own
//! way).

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use chrono::NaiveDateTime;
use sqlx::{Database, Pool, SqlStr};

use super::{Driver, Param};
use crate::runs::{Page, RunArgs, RunRow, RunTable};
use crate::single;

/// The run statements of one provider, built once from the run table (its retention and
/// `runs_per_lock` are written into them): those every dialect has, and `own`, those only its
/// dialect has. What they bind: `started` a run and its heartbeat lease or NULL
/// ([`Driver::start_arguments`]), `finished` a run and its end, `alive` a run's key and the
/// lease ([`Driver::alive_arguments`]), `list_lock` a lock and a [`Page`], `list_all` a
/// [`Page`] ([`Driver::page_arguments`]); the trims a lock.
#[doc(hidden)]
#[derive(Debug)]
pub struct RunStatements<Own = ()> {
    /// Records a run's start; nothing is written when its row exists. Returns the row.
    /// PostgreSQL's also trims the run's lock and the rows past the retention ([`Trims`]).
    pub(crate) started: SqlStr,
    /// Records a run's end on its row if still running, or the whole run when it has none.
    pub(super) finished: SqlStr,
    /// Moves a running row's heartbeat on if it has not passed; one row affected if so.
    pub(super) alive: SqlStr,
    /// A page of one lock's rows, newest first.
    pub(crate) list_lock: SqlStr,
    /// A page of every lock's rows, newest first.
    pub(crate) list_all: SqlStr,
    /// The trims a start runs when they are due (none where `started` trims itself).
    pub(super) trims: Option<Trims>,
    /// The dialect's own.
    #[cfg_attr(not(feature = "mysql"), allow(dead_code))]
    pub(super) own: Own,
}

/// The statements that keep the run table bounded, run after a start where the database cannot
/// fold them into the start's own statement (MySQL, SQLite): deleting takes the table's write
/// lock (SQLite) or locks the rows it scans (InnoDB), so they run only when a read says they
/// have something to do.
#[doc(hidden)]
#[derive(Debug)]
pub(crate) struct Trims {
    /// The lock: one row of two integers, whether the lock has more than `runs_per_lock` +
    /// [`TRIM_BATCH`] rows, and whether any row is past the retention (heartbeat-live ones
    /// aside). MySQL reads the two in its `read` instead.
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    pub(super) due: SqlStr,
    /// The lock (bound twice on MySQL): deletes its rows past its newest `runs_per_lock`.
    pub(super) per_lock: SqlStr,
    /// Deletes every row past the retention.
    pub(super) aged: SqlStr,
}

/// How far past `runs_per_lock` a lock may go before a start that cannot fold its trim into
/// its own statement deletes the surplus: a lock holds at most `runs_per_lock + TRIM_BATCH + 1`
/// rows (plus any whose heartbeat is live), within core's `RUN_TRIM_SLACK`.
#[cfg_attr(not(any(feature = "mysql", feature = "sqlite")), allow(dead_code))]
pub(crate) const TRIM_BATCH: u32 = shedlock_core::RUN_TRIM_SLACK / 2;

/// Most rows past the retention one start deletes: a start never turns into a long delete
/// (after `run_retention` was lowered on a large table, say); the next starts take the rest.
pub(crate) const AGED_BATCH: u32 = 1000;

/// A row that may be deleted: anything but a run whose heartbeat (`finished_at` while
/// `outcome = 'running'`) has not passed at `now`, an SQL expression; `row` qualifies the
/// columns (`o.` or nothing).
pub(crate) fn deletable(row: &str, now: &str) -> String {
    format!("({row}outcome <> 'running' OR {row}finished_at IS NULL OR {row}finished_at <= {now})")
}

/// Newest first, as every list and trim orders a lock's rows.
pub(crate) const NEWEST_FIRST: &str = "started_at DESC, fencing_token DESC, attempt DESC";

/// The condition and order of a page ([`Page`]), newest first as core's `RunCursor` orders
/// records: by start, token, attempt, then lock name in byte order (`lock` is the column so
/// compared: PostgreSQL needs `COLLATE "C"`). `param` names the parameters: `S` since, `T` the
/// cursor's time, `K` its token, `A` its attempt, `C` its lock, `L` the limit (MySQL binds
/// them in the order written: S T T K A T K A C L). `across`: every lock's rows, which the
/// lock name orders too.
pub(crate) fn page_sql(param: impl Fn(char) -> String, lock: &str, across: bool) -> String {
    let [s, t, k, a, c, l] = ['S', 'T', 'K', 'A', 'C', 'L'].map(param);
    let key = "(started_at, fencing_token, attempt)";
    let then = if across {
        format!(", {lock} DESC")
    } else {
        String::new()
    };
    format!(
        "started_at >= {s} AND started_at <= {t} AND {key} <= ({t}, {k}, {a}) \
         AND ({key} < ({t}, {k}, {a}) OR {lock} < {c}) ORDER BY {NEWEST_FIRST}{then} LIMIT {l}"
    )
}

#[doc(hidden)]
/// A run's end as [`RunDialect::finished_many`] writes it: the run, its outcome and error.
pub type Ending<'a> = (RunArgs<'a>, &'a str, Option<&'a str>);

/// The run records of a dialect: a second table beside the lock table, one write to start a
/// run (which keeps the table bounded), one to end it and one per heartbeat. Implemented once
/// per dialect, in its `runs` module; not public API.
#[doc(hidden)]
pub trait RunDialect: Send + Sync + 'static {
    /// The driver's database.
    type Database: Driver;

    /// The run statements only this dialect has.
    type OwnStatements: Debug + Send + Sync;

    /// A time or NULL as the run table holds it.
    type Time: Param<Self::Database>;

    /// A heartbeat lease as the statements bind it.
    type Lease: Param<Self::Database>;

    /// The precision of the times the table holds: cursors and `since` are rounded to it.
    const PRECISION: Duration;

    /// `time` as [`Time`](Self::Time).
    fn time(time: Option<NaiveDateTime>) -> Self::Time;

    /// `lease` as [`Lease`](Self::Lease).
    fn lease(lease: Duration) -> Self::Lease;

    /// Builds the statements.
    fn statements(table: &RunTable) -> RunStatements<Self::OwnStatements>;

    /// `CREATE TABLE IF NOT EXISTS` and its indexes for the run table.
    fn create_sql(table: &RunTable) -> String;

    /// Creates the run table if missing, and the indexes it reads by in a table that predates
    /// them (dropping the one they replace).
    fn create<'a>(
        pool: &'a Pool<Self::Database>,
        table: &'a RunTable,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a;

    /// Records a run's start (nothing when it exists) and returns its row, read to the end
    /// (`single`): a start whose commit failed is no start. Then runs the trims that are due
    /// ([`Trims`]); their failure is logged, never the start's.
    fn started<'a>(
        connection: &'a mut <Self::Database as Database>::Connection,
        sql: &'a RunStatements<Self::OwnStatements>,
        args: RunArgs<'a>,
    ) -> impl Future<Output = Result<RunRow, sqlx::Error>> + Send + 'a {
        async move {
            let lease = args.lease.map(Self::lease);
            let run = Self::Database::start_arguments(&args, Self::time(args.tick), lease)?;
            let rows = Self::Database::run_rows(&mut *connection, &sql.started, run).await?;
            let row = single(rows)?
                .ok_or_else(|| sqlx::Error::Protocol("the run upsert returned no row".into()))?;
            if let Some(trims) = &sql.trims {
                let due = Self::Database::flags(
                    &mut *connection,
                    &trims.due,
                    Self::Database::lock_argument(args.lock, 1)?,
                )
                .await;
                match due {
                    Ok(due) => {
                        run_trims::<Self::Database>(connection, trims, args.lock, due, 1).await;
                    }
                    Err(error) => trim_failed(&error, args.lock),
                }
            }
            Ok(row)
        }
    }

    /// Records a run's end on its row if still running, or the whole run when it has none.
    fn finished<'a>(
        connection: &'a mut <Self::Database as Database>::Connection,
        sql: &'a RunStatements<Self::OwnStatements>,
        args: RunArgs<'a>,
        outcome: &'a str,
        error: Option<&'a str>,
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a {
        async move {
            let tick = Self::time(args.tick);
            let run = Self::Database::end_arguments(&args, tick, outcome, error)?;
            Self::Database::execute(connection, &sql.finished, run).await
        }
    }

    /// Most starts or ends [`started_many`](Self::started_many) and
    /// [`finished_many`](Self::finished_many) write in one statement; 1: each goes alone.
    const MAX_BATCH: usize = 1;

    /// Records the starts of `runs` (distinct keys) as [`started`](Self::started) does each,
    /// in as few statements as the database allows: their rows, in any order.
    fn started_many<'a>(
        connection: &'a mut <Self::Database as Database>::Connection,
        sql: &'a RunStatements<Self::OwnStatements>,
        runs: &'a [RunArgs<'a>],
    ) -> impl Future<Output = Result<Vec<RunRow>, sqlx::Error>> + Send + 'a {
        async move {
            let mut rows = Vec::with_capacity(runs.len());
            for run in runs {
                rows.push(Self::started(&mut *connection, sql, *run).await?);
            }
            Ok(rows)
        }
    }

    /// Records the ends of `runs` (distinct keys) as [`finished`](Self::finished) does each,
    /// in as few statements as the database allows.
    fn finished_many<'a>(
        connection: &'a mut <Self::Database as Database>::Connection,
        sql: &'a RunStatements<Self::OwnStatements>,
        runs: &'a [Ending<'a>],
    ) -> impl Future<Output = Result<(), sqlx::Error>> + Send + 'a {
        async move {
            for ending in runs {
                let (run, outcome, error) = *ending;
                Self::finished(&mut *connection, sql, run, outcome, error).await?;
            }
            Ok(())
        }
    }

    /// Moves the heartbeat of a run still running whose heartbeat has not passed to now +
    /// `lease`: whether it did.
    fn alive<'a>(
        connection: &'a mut <Self::Database as Database>::Connection,
        sql: &'a RunStatements<Self::OwnStatements>,
        args: RunArgs<'a>,
        lease: Duration,
    ) -> impl Future<Output = Result<bool, sqlx::Error>> + Send + 'a {
        async move {
            let key = Self::Database::alive_arguments(&args, Self::lease(lease))?;
            Ok(Self::Database::affected(connection, &sql.alive, key).await? > 0)
        }
    }

    /// A page of run rows, newest first: one lock's, or every lock's.
    fn list<'a>(
        pool: &'a Pool<Self::Database>,
        sql: &'a RunStatements<Self::OwnStatements>,
        lock: Option<&'a str>,
        page: Page,
    ) -> impl Future<Output = Result<Vec<RunRow>, sqlx::Error>> + Send + 'a {
        async move {
            let statement = if lock.is_some() {
                &sql.list_lock
            } else {
                &sql.list_all
            };
            let (since, before) = (
                Self::time(Some(page.since)),
                Self::time(Some(page.before.0)),
            );
            let query = Self::Database::page_arguments(lock, since, before, &page)?;
            Self::Database::run_rows(&mut *pool.acquire().await?, statement, query).await
        }
    }
}

/// Runs the trims `due` says are due (`(per lock, aged)`, non-zero when due), `binds` the lock
/// that many times into the per-lock trim. Housekeeping: a failure is logged, never the run's.
pub(crate) async fn run_trims<DB: Driver>(
    connection: &mut DB::Connection,
    trims: &Trims,
    lock: &str,
    (per_lock, aged): (i64, i64),
    binds: usize,
) {
    if per_lock != 0 {
        let trimmed = match DB::lock_argument(lock, binds) {
            Ok(arguments) => DB::execute(&mut *connection, &trims.per_lock, arguments).await,
            Err(error) => Err(error),
        };
        if let Err(error) = trimmed {
            trim_failed(&error, lock);
        }
    }
    if aged != 0 {
        let arguments = DB::Arguments::default();
        if let Err(error) = DB::execute(connection, &trims.aged, arguments).await {
            trim_failed(&error, lock);
        }
    }
}

fn trim_failed(error: &sqlx::Error, lock: &str) {
    tracing::warn!(%error, %lock, "deleting old run records failed");
}

/// The run table of the dialects whose DDL differs only in `types`, aligned as in `sql/`, and
/// its `indexes` statements.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) fn aligned_run_table_sql(
    table: &str,
    types: &super::ColumnTypes,
    indexes: &str,
) -> String {
    let super::ColumnTypes { name, time, token } = types;
    format!(
        "CREATE TABLE IF NOT EXISTS {table} (\n    \
         lock_name     {name:<13} NOT NULL,\n    \
         fencing_token {token:<13} NOT NULL,\n    \
         attempt       INTEGER       NOT NULL,\n    \
         job           VARCHAR(255)  NOT NULL,\n    \
         tick          {time},\n    \
         holder        VARCHAR(255)  NOT NULL,\n    \
         started_at    {time:<13} NOT NULL,\n    \
         finished_at   {time},\n    \
         outcome       VARCHAR(16)   NOT NULL,\n    \
         error         VARCHAR(2000),\n    \
         PRIMARY KEY (lock_name, fencing_token, attempt)\n);\n\
         {indexes}"
    )
}

/// The columns of the run table's two indexes, by their name suffix: one lock's newest first
/// (lists, recovery, the per-lock trim), and every lock's newest first (lists across locks,
/// the retention).
pub(crate) const RUN_INDEXES: [(&str, &str); 2] = [
    (
        "lock_newest",
        "lock_name, started_at, fencing_token, attempt",
    ),
    ("newest", "started_at, fencing_token, attempt"),
];

/// `CREATE INDEX IF NOT EXISTS` for [`RUN_INDEXES`] on `table` (`schema.name` or `name`), named
/// `<name>_<suffix>` (cut and hashed to fit an identifier); `qualify` puts the schema before the
/// index's name (SQLite) rather than leaving it to the table's (PostgreSQL).
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) fn create_run_indexes(table: &str, qualify: bool) -> String {
    let (schema, bare) = split_schema(table);
    let on = if qualify { bare } else { table };
    RUN_INDEXES
        .iter()
        .map(|(suffix, columns)| {
            let prefix = if qualify { schema } else { "" };
            let name = crate::runs::index_name(bare, suffix);
            format!("CREATE INDEX IF NOT EXISTS {prefix}{name} ON {on} ({columns});")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `("schema.", "name")` of `schema.name`, `("", "name")` of `name`.
#[cfg(any(feature = "postgres", feature = "sqlite"))]
pub(crate) fn split_schema(table: &str) -> (&str, &str) {
    match table.split_once('.') {
        Some((schema, bare)) => (&table[..=schema.len()], bare),
        None => ("", table),
    }
}
