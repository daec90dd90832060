//! PostgreSQL (and databases speaking its protocol at `SERIALIZABLE`, such as CockroachDB).
//!
//! Every statement reads the clock once, as `timezone('utc', clock_timestamp())`:
//! `clock_timestamp()` is the time of the statement itself, where `now()` would be the start of
//! an enclosing transaction; `timezone('utc', …)` gives a UTC `TIMESTAMP` whatever the session's
//! time zone.

mod hints;
mod runs;

use std::sync::Arc;
use std::time::Duration;

use chrono::NaiveDateTime;
use shedlock_core::{Error, LockConfiguration};
use sqlx::{PgConnection, PgPool, Postgres, SqlStr, Transaction};
use tokio::sync::broadcast;

use crate::dialect::{
    AcquiredRow, Driver, Statements, TickBounds, add_column, identifiers, sealed::Sealed,
};
use crate::{
    Acquire, Acquired, CatalogColumn, ColumnKind, ColumnTypes, Dialect, Lease, MAX_IDENTIFIER_LEN,
    SqlLockProvider, SqlLockProviderBuilder, Table, lease_millis, single, trusted_sql,
};
use hints::{ReleaseHints, is_unsupported};

/// Locks in a PostgreSQL table, on the database's clock, with fencing tokens.
///
/// Each operation is one autocommit statement, one round trip: acquire is an
/// `INSERT … ON CONFLICT DO UPDATE … WHERE lock_until <= now RETURNING …`, release and extend are
/// `UPDATE`s matching name, holder **and** fencing token. A batch (`acquire_many`, or acquires
/// that queued while every connection was busy) is one statement per 1,000 locks: an
/// `UPDATE` of the free rows, locked in name order, joined to `unnest` of the names with each
/// one's lease, window and tick, and an `INSERT … ON CONFLICT DO NOTHING` of the missing ones
/// (see [`SqlLockProvider`]). Times are `TIMESTAMP` in UTC from
/// `clock_timestamp()`, so neither instance clocks nor session time zones matter.
///
/// [`connect`](SqlLockProvider::connect) opens a pool of sqlx's default size (10) that does not
/// ping connections it hands out (`test_before_acquire(false)`); the provider opens up to 32
/// connections of its own for lock statements as concurrent statements need them (see
/// [`dedicated_connections`](SqlLockProviderBuilder::dedicated_connections)).
///
/// For fast handover (leader election), a release can also send `NOTIFY` on the
/// [release channel](SqlLockProvider::release_channel) (default `<table>_released`,
/// lower-cased, `.` as `_`; payload: the lock name) from the same statement, so that waiting
/// instances retry at once instead of at their next poll;
/// [`LockProvider::release_hints`](shedlock_core::LockProvider::release_hints) listens for
/// them. PostgreSQL serialises the commits of all notifying transactions (8 workers doing
/// acquire+release pairs ran about 4 times slower with a `NOTIFY` on every release), so by
/// default a provider only notifies once it (or a clone) listens for hints itself, which every
/// election candidate does.
/// [`hint_every_release`](SqlLockProviderBuilder::hint_every_release) and
/// [`without_release_hints`](SqlLockProviderBuilder::without_release_hints) change that.
/// Notifications are hints: they are lost while a listener reconnects, so keep polling too.
///
/// **`SERIALIZABLE` databases (CockroachDB).** The statements are correct at any isolation
/// level; serialization failures (`40001`) are retried (see [`SqlLockProvider`]). Where the
/// database refuses `LISTEN` or `pg_notify`, the provider notices at the first attempt, logs
/// it once and runs without hints (followers poll); `without_release_hints()` says so up
/// front.
///
/// ```no_run
/// use std::time::Duration;
/// use shedlock_core::{LockConfiguration, LockProvider};
/// use shedlock_sqlx::PgLockProvider;
///
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let provider = PgLockProvider::connect("postgres://localhost/app").await?;
/// provider.create_schema().await?;
/// let config = LockConfiguration::new("nightly_report", Duration::from_secs(600), Duration::ZERO)?;
/// if let Some(lease) = provider.acquire(&config).await? {
///     println!("running with fencing token {}", lease.fencing_token());
///     provider.release(&lease).await?;
/// }
/// # Ok(())
/// # }
/// ```
pub type PgLockProvider = SqlLockProvider<Pg>;

/// The PostgreSQL [`Dialect`].
#[derive(Debug, Clone, Copy)]
pub struct Pg;

impl Sealed for Pg {}

/// Serialises concurrent `create_schema` calls across instances (an advisory lock key).
const SCHEMA_LOCK_KEY: i64 = 0x5348_4544_4c4f_434b; // "SHEDLOCK"

/// A transaction holding the schema's advisory lock ([`SCHEMA_LOCK_KEY`]) until it ends.
async fn schema_transaction(pool: &PgPool) -> Result<Transaction<'static, Postgres>, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(SCHEMA_LOCK_KEY)
        .execute(&mut *tx)
        .await?;
    Ok(tx)
}

const NOW: &str = "timezone('utc', clock_timestamp())";

/// `<table>_released` (dots as underscores, lower case); when that is longer than an identifier
/// may be, the table's name is cut and a hash of the whole name (FNV-1a, the same in every
/// process and build) keeps channels of different tables apart.
fn default_channel(table: &str) -> String {
    let base = table.replace('.', "_").to_lowercase();
    let channel = format!("{base}_released");
    if channel.len() <= MAX_IDENTIFIER_LEN {
        return channel;
    }
    let hash = base.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    let suffix = format!("_{hash:016x}_released");
    let mut cut = MAX_IDENTIFIER_LEN - suffix.len();
    while !base.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{suffix}", &base[..cut])
}

/// When a release sends `NOTIFY`, and on which channel.
#[doc(hidden)]
#[derive(Debug, Clone, Default)]
pub struct NotifyOptions {
    /// `None`: `<table>_released` (shortened with a hash past 63 bytes).
    channel: Option<String>,
    policy: NotifyPolicy,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
enum NotifyPolicy {
    /// Once this provider (or a clone) listens for hints, i.e. takes part in an election.
    #[default]
    WhileListening,
    Always,
    Never,
}

#[doc(hidden)]
#[derive(Debug)]
pub struct NotifyState {
    channel: Option<Arc<str>>,
    notify_always: bool,
    hints: ReleaseHints,
}

impl NotifyState {
    /// The channel a release notifies now, if any. NOTIFY serialises the commits of all
    /// notifying transactions in the database, so it is sent only where it can help: once
    /// someone in this process listens (an election), or when asked for every release.
    fn notifies(&self) -> Option<&str> {
        self.channel
            .as_deref()
            .filter(|_| self.notify_always || self.hints.started())
            .filter(|_| !self.hints.unsupported())
    }
}

/// The statements only PostgreSQL has.
#[doc(hidden)]
#[derive(Debug)]
pub struct PgStatements {
    /// `$1` names (distinct), `$2` holder, `$3` leases and `$4` windows in milliseconds, `$5`
    /// to `$7` the ticks' bounds (`TickBounds`), one per name: a row (name, token, locked_at,
    /// lock_until) per lock acquired.
    acquire_batch: SqlStr,
    /// `release`, and `$5` a channel to notify of the release in the same statement.
    release_notify: SqlStr,
    /// `$1` names (distinct), `$2` tokens and `$3` lock_at_least_for in milliseconds, one per
    /// name, `$4` holder: a row (name) per lease released.
    release_batch: SqlStr,
}

/// `$1` table, `$2` column: whether the column exists.
const HAS_COLUMN: &str = "SELECT EXISTS (SELECT 1 FROM pg_attribute \
     WHERE attrelid = $1::text::regclass AND attname = lower($2) AND NOT attisdropped)";

impl Dialect for Pg {
    type Database = Postgres;
    type OwnStatements = PgStatements;
    type Options = NotifyOptions;
    type State = NotifyState;
    type Runs = runs::PgRuns;

    const COLUMN_TYPES: ColumnTypes = ColumnTypes {
        name: "VARCHAR(64)",
        time: "TIMESTAMP",
        token: "BIGINT",
    };

    const NOW: &'static str = NOW;

    /// `acquire`: `$1` name, `$2` holder, `$3` lease, `$4` window (refused if acquired more
    /// recently), `$5` to `$7` the tick's bounds (`TickBounds`: tick or NULL, latest last
    /// tick, earliest clock in ms): one row (token, locked_at, lock_until) if acquired.
    /// `release`: `$1` name, `$2` holder, `$3` token, `$4` lock_at_least_for: one row if
    /// released. `extend`: the
    /// same with `$4` the lease: one row (lock_until) if extended. `verify`: `$1` name, `$2`
    /// holder, `$3` token: one row if that lease is live; locks the row until the caller's
    /// transaction ends. `lock_state`: `$1` name.
    fn statements(table: &Table) -> Statements<PgStatements> {
        let [t, name, until, at, by, token, last] = identifiers(table);
        // The table is aliased `l` and the clock subquery `db`, so no configured column name
        // can be ambiguous with `now`.
        // Tokens: `max(previous + 1, clock in µs)` (see "Token floor" in `values.rs`); the
        // proposed row carries the clock's part.
        let clock_micros = "(extract(epoch FROM db.now) * 1000000)::bigint";
        let clock_millis = "floor(extract(epoch FROM db.now) * 1000)::bigint";
        // A tick too far ahead of the clock proposes no row, so neither inserts nor updates
        // one; the last tick is checked against the row's, and kept on a grant (NULL: the
        // row's stays).
        let acquire = format!(
            "INSERT INTO {t} AS l ({name}, {until}, {at}, {by}, {token}, {last}) \
             SELECT $1, db.now + $3, db.now, $2, {clock_micros}, $5 \
             FROM (SELECT {NOW} AS now) AS db WHERE {clock_millis} >= $7 \
             ON CONFLICT ({name}) DO UPDATE SET {until} = EXCLUDED.{until}, \
             {at} = EXCLUDED.{at}, {by} = EXCLUDED.{by}, \
             {token} = GREATEST(GREATEST(l.{token}, 0) + 1, EXCLUDED.{token}), \
             {last} = COALESCE(EXCLUDED.{last}, l.{last}) \
             WHERE l.{until} <= EXCLUDED.{at} \
             AND (l.{at} IS NULL OR l.{at} <= EXCLUDED.{at} - $4) \
             AND (l.{last} IS NULL OR l.{last} <= $6) \
             RETURNING {token}, {at}, {until}"
        );
        // The batch's rows in two parts, since `ON CONFLICT DO UPDATE … WHERE` can only see
        // the table's row and the proposed one, and the window differs per row: free rows
        // are taken with the single statement's conditions by an `UPDATE` joined to the
        // batch, missing rows inserted. Both parts read the same snapshot, so they never touch
        // the same row; a row another instance inserts meanwhile is left to it (conflict).
        // The free rows are locked first in name order (`free`), so that the batches of
        // several instances wait for each other instead of deadlocking.
        let ms = "* INTERVAL '1 millisecond'";
        let free = format!(
            "l.{until} <= db.now AND (l.{at} IS NULL OR l.{at} <= db.now - b.window_ms {ms}) \
             AND (l.{last} IS NULL OR l.{last} <= b.latest_last) \
             AND {clock_millis} >= b.earliest_now"
        );
        // The common table expressions have quoted names with a space, which no validated
        // (plain, unquoted) table name can equal: a CTE named like the lock table would
        // shadow it. Inside, each is read under a short alias.
        let acquire_batch = format!(
            "WITH \"shedlock batch\" AS (SELECT * FROM unnest($1::text[], $3::bigint[], \
             $4::bigint[], $5::bigint[], $6::bigint[], $7::bigint[]) \
             AS b(lock_name, lease_ms, window_ms, tick, latest_last, earliest_now)), \
             \"shedlock clock\" AS (SELECT {NOW} AS now), \
             \"shedlock free\" AS (SELECT l.{name} AS lock_name FROM {t} AS l \
             JOIN \"shedlock batch\" AS b ON l.{name} = b.lock_name, \"shedlock clock\" AS db \
             WHERE {free} ORDER BY l.{name} FOR UPDATE OF l), \
             \"shedlock taken\" AS (UPDATE {t} AS l SET {until} = db.now + b.lease_ms {ms}, \
             {at} = db.now, {by} = $2, \
             {token} = GREATEST(GREATEST(l.{token}, 0) + 1, {clock_micros}), \
             {last} = COALESCE(b.tick, l.{last}) \
             FROM \"shedlock free\" AS f, \"shedlock batch\" AS b, \"shedlock clock\" AS db \
             WHERE l.{name} = f.lock_name AND b.lock_name = f.lock_name AND {free} \
             RETURNING l.{name}, l.{token}, l.{at}, l.{until}), \
             \"shedlock created\" AS (INSERT INTO {t} AS l \
             ({name}, {until}, {at}, {by}, {token}, {last}) \
             SELECT b.lock_name, db.now + b.lease_ms {ms}, db.now, $2, {clock_micros}, b.tick \
             FROM \"shedlock batch\" AS b, \"shedlock clock\" AS db \
             WHERE {clock_millis} >= b.earliest_now \
             ON CONFLICT ({name}) DO NOTHING \
             RETURNING l.{name}, l.{token}, l.{at}, l.{until}) \
             SELECT * FROM \"shedlock taken\" UNION ALL SELECT * FROM \"shedlock created\""
        );
        let release = format!(
            "UPDATE {t} AS l SET {until} = GREATEST(l.{at} + $4, db.now) \
             FROM (SELECT {NOW} AS now) AS db \
             WHERE l.{name} = $1 AND l.{by} = $2 AND l.{token} = $3 AND l.{until} > db.now \
             RETURNING l.{name}"
        );
        let release_notify =
            format!("WITH released AS ({release}) SELECT pg_notify($5, {name}) FROM released");
        // The held rows are locked first in name order, as the acquire batch locks the free
        // ones, then ended with the single statement's conditions.
        let held = format!("l.{by} = $4 AND l.{token} = b.token AND l.{until} > db.now");
        let release_batch = format!(
            "WITH \"shedlock batch\" AS (SELECT * FROM unnest($1::text[], $2::bigint[], \
             $3::bigint[]) AS b(lock_name, token, least_ms)), \
             \"shedlock clock\" AS (SELECT {NOW} AS now), \
             \"shedlock held\" AS (SELECT l.{name} AS lock_name FROM {t} AS l \
             JOIN \"shedlock batch\" AS b ON l.{name} = b.lock_name, \"shedlock clock\" AS db \
             WHERE {held} ORDER BY l.{name} FOR UPDATE OF l) \
             UPDATE {t} AS l SET {until} = GREATEST(l.{at} + b.least_ms {ms}, db.now) \
             FROM \"shedlock held\" AS h, \"shedlock batch\" AS b, \"shedlock clock\" AS db \
             WHERE l.{name} = h.lock_name AND b.lock_name = h.lock_name AND {held} \
             RETURNING l.{name}"
        );
        let extend = format!(
            "UPDATE {t} AS l SET {until} = db.now + $4 FROM (SELECT {NOW} AS now) AS db \
             WHERE l.{name} = $1 AND l.{by} = $2 AND l.{token} = $3 AND l.{until} > db.now \
             RETURNING l.{until}"
        );
        let verify = format!(
            "SELECT 1 FROM {t} AS l \
             WHERE l.{name} = $1 AND l.{by} = $2 AND l.{token} = $3 AND l.{until} > {NOW} \
             FOR SHARE"
        );
        // Inspection clamps times to years 1..=9999: PostgreSQL also stores `infinity` and
        // years sqlx/chrono cannot represent (it would panic decoding them).
        // NULL stays NULL (GREATEST and LEAST would skip it): an unreadable row is an error,
        // never a time.
        let clamp = |column: &str| {
            format!(
                "CASE WHEN l.{column} IS NULL THEN NULL ELSE \
                 GREATEST(LEAST(l.{column}, TIMESTAMP '9999-12-31 23:59:59.999'), \
                 TIMESTAMP '0001-01-01 00:00:00') END"
            )
        };
        let (until_shown, at_shown) = (clamp(until), clamp(at));
        let select_rows = format!(
            "SELECT l.{name}, {until_shown}, {at_shown}, l.{by}, COALESCE(l.{token}, 0), db.now \
             FROM {t} AS l, (SELECT {NOW} AS now) AS db"
        );
        Statements {
            acquire: trusted_sql(acquire),
            release: trusted_sql(release),
            extend: trusted_sql(extend),
            verify: trusted_sql(verify),
            lock_state: trusted_sql(format!("{select_rows} WHERE l.{name} = $1")),
            list_locks: trusted_sql(format!("{select_rows} ORDER BY l.{name}")),
            own: PgStatements {
                acquire_batch: trusted_sql(acquire_batch),
                release_notify: trusted_sql(release_notify),
                release_batch: trusted_sql(release_batch),
            },
        }
    }

    fn state(options: NotifyOptions, table: &Table) -> Result<NotifyState, Error> {
        let channel = match (options.policy, options.channel) {
            (NotifyPolicy::Never, _) => None,
            (_, Some(channel)) => Some(channel),
            (_, None) => Some(default_channel(&table.name)),
        };
        if let Some(channel) = &channel
            && (channel.is_empty() || channel.len() > MAX_IDENTIFIER_LEN || channel.contains('\0'))
        {
            return Err(Error::invalid_config(
                "release_channel",
                format!(
                    "{channel:?} is not a usable channel name (1 to {MAX_IDENTIFIER_LEN} bytes); \
                     set one with `release_channel` or use `without_release_hints`"
                ),
            ));
        }
        Ok(NotifyState {
            channel: channel.map(Arc::from),
            notify_always: options.policy == NotifyPolicy::Always,
            hints: ReleaseHints::default(),
        })
    }

    async fn acquire(
        connection: &mut PgConnection,
        sql: &Statements<PgStatements>,
        args: Acquire<'_>,
    ) -> Result<Option<Acquired>, sqlx::Error> {
        let (lease, window) = (interval(args.lock_at_most_for()), interval(args.window()));
        let acquire = Postgres::acquire_arguments(&args, lease, window)?;
        let row: Option<AcquiredRow> =
            Postgres::single_row(connection, &sql.acquire, acquire).await?;
        Ok(row.map(Acquired::from))
    }

    /// Enough for a fleet's tick, and the parameters stay near 100 KB: 970 acquisitions ran
    /// in 19 ms (`EXPLAIN ANALYZE`), where as many single statements cost the server about
    /// 145 ms of CPU (`BENCHMARKS.md`, *Fleet*).
    const MAX_ACQUIRE_BATCH: usize = 1000;

    async fn acquire_batch<'a>(
        connection: &'a mut PgConnection,
        sql: &'a Statements<PgStatements>,
        holder: &'a str,
        configs: impl Iterator<Item = &'a LockConfiguration> + Send + 'a,
    ) -> Result<Vec<(String, Acquired)>, sqlx::Error> {
        // Sorted by name (by the caller), so that the inserts of concurrent batches come in
        // the same order too (the statement locks the free rows in name order itself).
        let configs: Vec<&LockConfiguration> = configs.collect();
        let names: Vec<&str> = configs.iter().map(|config| config.name()).collect();
        let leases: Vec<i64> = configs
            .iter()
            .map(|config| lease_millis(config.lock_at_most_for()))
            .collect();
        // Read when binding, after the wait for a connection, as for a single acquire.
        let windows: Vec<i64> = configs
            .iter()
            .map(|config| lease_millis(config.acquired_within_window()))
            .collect();
        let ticks: Vec<TickBounds> = configs.iter().map(|c| TickBounds::of(c)).collect();
        let rows: Vec<(String, i64, NaiveDateTime, NaiveDateTime)> =
            sqlx::query_as(sql.own.acquire_batch.clone())
                .bind(names)
                .bind(holder)
                .bind(leases)
                .bind(windows)
                .bind(ticks.iter().map(|b| b.tick).collect::<Vec<_>>())
                .bind(ticks.iter().map(|b| b.latest_last).collect::<Vec<_>>())
                .bind(ticks.iter().map(|b| b.earliest_now).collect::<Vec<_>>())
                .fetch_all(connection)
                .await?;
        Ok(rows
            .into_iter()
            .map(|(name, token, locked_at, lock_until)| {
                (name, Acquired::from((token, locked_at, lock_until)))
            })
            .collect())
    }

    async fn release(
        connection: &mut PgConnection,
        sql: &Statements<PgStatements>,
        state: &NotifyState,
        args: Lease<'_>,
    ) -> Result<bool, sqlx::Error> {
        let notify = state.notifies();
        let query = |sql: &SqlStr| {
            let lease = Postgres::lease_arguments(&args, interval(args.duration))?;
            Ok::<_, sqlx::Error>(sqlx::query_with(sql.clone(), lease))
        };
        if let Some(channel) = notify {
            match query(&sql.own.release_notify)?
                .bind(channel)
                .fetch_all(&mut *connection)
                .await
            {
                // The statement failed as a whole: release without the notification.
                Err(e) if is_unsupported(&e) => state.hints.set_unsupported(&e),
                released => return Ok(single(released?)?.is_some()),
            }
        }
        Ok(single(query(&sql.release)?.fetch_all(connection).await?)?.is_some())
    }

    /// As many as the acquire batch.
    const MAX_RELEASE_BATCH: usize = 1000;

    async fn release_batch<'a>(
        connection: &'a mut PgConnection,
        sql: &'a Statements<PgStatements>,
        state: &'a NotifyState,
        leases: &'a [Lease<'a>],
    ) -> Result<Option<Vec<String>>, sqlx::Error> {
        // A release that notifies goes alone, with its own notification.
        if state.notifies().is_some() {
            return Ok(None);
        }
        let Some(holder) = leases.first().map(|lease| lease.holder) else {
            return Ok(Some(Vec::new()));
        };
        let names: Vec<&str> = leases.iter().map(|lease| lease.name).collect();
        let tokens: Vec<i64> = leases.iter().map(|lease| lease.token).collect();
        let least: Vec<i64> = leases
            .iter()
            .map(|lease| lease_millis(lease.duration))
            .collect();
        let released: Vec<(String,)> = sqlx::query_as(sql.own.release_batch.clone())
            .bind(names)
            .bind(tokens)
            .bind(least)
            .bind(holder)
            .fetch_all(connection)
            .await?;
        Ok(Some(released.into_iter().map(|(name,)| name).collect()))
    }

    async fn extend(
        connection: &mut PgConnection,
        sql: &Statements<PgStatements>,
        args: Lease<'_>,
    ) -> Result<Option<NaiveDateTime>, sqlx::Error> {
        let lease = Postgres::lease_arguments(&args, interval(args.duration))?;
        let row = Postgres::single_row(connection, &sql.extend, lease).await?;
        Ok(row.map(|(lock_until,)| lock_until))
    }

    async fn table_columns(
        pool: &PgPool,
        table: &Table,
    ) -> Result<Vec<CatalogColumn>, sqlx::Error> {
        sqlx::query_as(
            "SELECT lower(a.attname::text), lower(format_type(a.atttypid, a.atttypmod)), \
             EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid \
             AND i.indisunique AND i.indpred IS NULL AND i.indnkeyatts = 1 \
             AND i.indkey[0] = a.attnum) \
             FROM pg_attribute a WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 \
             AND NOT a.attisdropped ORDER BY a.attnum",
        )
        .bind(&table.name)
        .fetch_all(pool)
        .await
    }

    /// `TIMESTAMP` without time zone only (sqlx reads `timestamptz` as another type), with at
    /// least millisecond precision: `timestamp(0..2)` rounds stored times by up to half a
    /// second, far more than a lease's clock allowance.
    fn type_fits(kind: ColumnKind, found: &str) -> bool {
        match kind {
            ColumnKind::Text => {
                found == "text"
                    || found.starts_with("character varying")
                    || found.starts_with("character(")
            }
            ColumnKind::Time => match found.strip_suffix(" without time zone") {
                Some("timestamp") => true,
                Some(precise) => precise
                    .strip_prefix("timestamp(")
                    .and_then(|p| p.strip_suffix(')'))
                    .and_then(|p| p.parse::<u8>().ok())
                    .is_some_and(|digits| digits >= 3),
                None => false,
            },
            ColumnKind::Integer => found == "bigint",
        }
    }

    async fn create_schema(pool: &PgPool, table: &Table) -> Result<(), sqlx::Error> {
        let mut tx = schema_transaction(pool).await?;
        sqlx::query(trusted_sql(table.create_table_sql(&Self::COLUMN_TYPES)))
            .execute(&mut *tx)
            .await?;
        for (column, definition) in table.added_columns(Self::COLUMN_TYPES.token) {
            // Checked first because ALTER TABLE takes an exclusive lock even when it changes
            // nothing.
            let exists: bool = sqlx::query_scalar(HAS_COLUMN)
                .bind(&table.name)
                .bind(column)
                .fetch_one(&mut *tx)
                .await?;
            if !exists {
                let add = add_column(table, "ADD COLUMN IF NOT EXISTS", column, &definition);
                sqlx::query(add).execute(&mut *tx).await?;
            }
        }
        tx.commit().await
    }

    /// Names of released locks, from `LISTEN` on the release channel. The first call starts a
    /// listener task that holds one connection of the pool until the provider and all its
    /// clones are dropped, and from then on their releases notify. `None` without a channel,
    /// outside a tokio runtime, or once the database refused `LISTEN`.
    fn release_hints(pool: &PgPool, state: &NotifyState) -> Option<broadcast::Receiver<Arc<str>>> {
        state.hints.subscribe(pool, state.channel.as_ref()?)
    }
}

impl PgLockProvider {
    /// The channel releases notify (payload: the lock name), unless built
    /// [`without_release_hints`](SqlLockProviderBuilder::without_release_hints). `LISTEN` on it,
    /// e.g. with `sqlx::postgres::PgListener::listen`, to learn at once that a lock became free
    /// (see [`PgLockProvider`] for when releases notify).
    pub fn release_channel(&self) -> Option<&str> {
        self.state.channel.as_deref()
    }
}

impl SqlLockProviderBuilder<Pg> {
    /// The channel releases notify, instead of `<table>_released` (at most 63 bytes,
    /// PostgreSQL's limit).
    pub fn release_channel(mut self, channel: impl Into<String>) -> Self {
        self.options.channel = Some(channel.into());
        self
    }

    /// Notify on every successful release, not only once this provider listens for hints:
    /// for instances that `LISTEN` on the channel themselves.
    pub fn hint_every_release(mut self) -> Self {
        self.options.policy = NotifyPolicy::Always;
        self
    }

    /// Never notify, and offer no release hints: for databases without `LISTEN`/`NOTIFY`
    /// (CockroachDB), where the provider would otherwise find out at its first attempt.
    pub fn without_release_hints(mut self) -> Self {
        self.options.policy = NotifyPolicy::Never;
        self
    }
}

/// A duration as an `INTERVAL` parameter, in whole milliseconds like the other dialects.
fn interval(duration: Duration) -> Duration {
    Duration::from_millis(lease_millis(duration).unsigned_abs())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_need_milliseconds() {
        let fits = |ty| Pg::type_fits(ColumnKind::Time, ty);
        assert!(fits("timestamp without time zone"));
        assert!(fits("timestamp(3) without time zone") && fits("timestamp(6) without time zone"));
        assert!(!fits("timestamp(0) without time zone") && !fits("timestamp(2) without time zone"));
        assert!(!fits("timestamp with time zone") && !fits("timestamp(3) with time zone"));
    }

    #[test]
    fn default_channels_fit_an_identifier_and_stay_apart() {
        assert_eq!(default_channel("app.ShedLock"), "app_shedlock_released");
        let long = "a".repeat(60);
        let (one, two) = (
            default_channel(&long),
            default_channel(&(long.clone() + "b")),
        );
        assert!(one.len() <= MAX_IDENTIFIER_LEN && two.len() <= MAX_IDENTIFIER_LEN);
        assert_ne!(one, two);
        assert_eq!(one, default_channel(&long), "the same in every process");
        assert!(default_channel(&"é".repeat(40)).len() <= MAX_IDENTIFIER_LEN);
    }
}
