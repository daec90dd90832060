//! The PostgreSQL statements, built once per provider from the validated table.
//!
//! Every statement reads the clock once, as `timezone('utc', clock_timestamp())`:
//! `clock_timestamp()` is the time of the statement itself, where `now()` would be the start of
//! an enclosing transaction; `timezone('utc', …)` gives a UTC `TIMESTAMP` whatever the session's
//! time zone.

use sqlx::SqlStr;

use crate::common::{ColumnTypes, Table, trusted_sql};

/// The lock table's column types (`sql/postgres.sql`): ShedLock's, with UTC times.
pub(crate) const COLUMN_TYPES: ColumnTypes = ColumnTypes {
    name: "VARCHAR(64)",
    time: "TIMESTAMP",
    token: "BIGINT",
};

/// One statement per provider operation.
#[derive(Debug)]
pub(crate) struct Statements {
    /// `$1` name, `$2` holder, `$3` lease, `$4` window (refused if acquired more recently): one
    /// row (token, locked_at, lock_until) if acquired.
    pub(crate) acquire: SqlStr,
    /// `$1` name, `$2` holder, `$3` token, `$4` lock_at_least_for: one row if released.
    pub(crate) release: SqlStr,
    /// `release`, and `$5` a channel to notify of the release in the same statement.
    pub(crate) release_notify: SqlStr,
    /// `$1` name, `$2` holder, `$3` token, `$4` lease: one row (lock_until) if extended.
    pub(crate) extend: SqlStr,
    /// `$1` name, `$2` token: one row if that lease is live; locks the row until the caller's
    /// transaction ends.
    pub(crate) verify: SqlStr,
    /// `$1` name: the row.
    pub(crate) lock_state: SqlStr,
    /// Every row, by name.
    pub(crate) list_locks: SqlStr,
    /// `CREATE TABLE IF NOT EXISTS`.
    pub(crate) create_table: SqlStr,
    /// `$1` table, `$2` column: whether the fencing token column exists.
    pub(crate) has_token_column: SqlStr,
    /// Adds the fencing token column to a ShedLock table.
    pub(crate) add_token_column: SqlStr,
}

const NOW: &str = "timezone('utc', clock_timestamp())";

impl Statements {
    pub(crate) fn new(table: &Table) -> Self {
        let t = &table.name;
        let c = &table.columns;
        let (name, until, at, by, token) = (
            &c.name,
            &c.lock_until,
            &c.locked_at,
            &c.locked_by,
            &c.fencing_token,
        );
        // The table is aliased `l` and the clock subquery `db`, so no configured column name
        // can be ambiguous with `now`.
        let acquire = format!(
            "INSERT INTO {t} AS l ({name}, {until}, {at}, {by}, {token}) \
             SELECT $1, db.now + $3, db.now, $2, 1 FROM (SELECT {NOW} AS now) AS db \
             ON CONFLICT ({name}) DO UPDATE SET {until} = EXCLUDED.{until}, \
             {at} = EXCLUDED.{at}, {by} = EXCLUDED.{by}, {token} = GREATEST(l.{token}, 0) + 1 \
             WHERE l.{until} <= EXCLUDED.{at} \
             AND (l.{at} IS NULL OR l.{at} <= EXCLUDED.{at} - $4) \
             RETURNING {token}, {at}, {until}"
        );
        let release = format!(
            "UPDATE {t} AS l SET {until} = GREATEST(l.{at} + $4, db.now) \
             FROM (SELECT {NOW} AS now) AS db \
             WHERE l.{name} = $1 AND l.{by} = $2 AND l.{token} = $3 AND l.{until} > db.now \
             RETURNING l.{name}"
        );
        let release_notify =
            format!("WITH released AS ({release}) SELECT pg_notify($5, {name}) FROM released");
        let extend = format!(
            "UPDATE {t} AS l SET {until} = db.now + $4 FROM (SELECT {NOW} AS now) AS db \
             WHERE l.{name} = $1 AND l.{by} = $2 AND l.{token} = $3 AND l.{until} > db.now \
             RETURNING l.{until}"
        );
        let verify = format!(
            "SELECT 1 FROM {t} AS l \
             WHERE l.{name} = $1 AND l.{token} = $2 AND l.{until} > {NOW} FOR SHARE"
        );
        // Inspection clamps times to years 1..=9999: PostgreSQL also stores `infinity` and
        // years sqlx/chrono cannot represent (it would panic decoding them).
        let clamp = |column: &str| {
            format!(
                "GREATEST(LEAST(l.{column}, TIMESTAMP '9999-12-31 23:59:59.999'), \
                 TIMESTAMP '0001-01-01 00:00:00')"
            )
        };
        let (until_shown, at_shown) = (clamp(until), clamp(at));
        let select_rows = format!(
            "SELECT l.{name}, {until_shown}, {at_shown}, l.{by}, COALESCE(l.{token}, 0), \
             l.{until} > {NOW} FROM {t} AS l"
        );
        Statements {
            acquire: trusted_sql(acquire),
            release: trusted_sql(release),
            release_notify: trusted_sql(release_notify),
            extend: trusted_sql(extend),
            verify: trusted_sql(verify),
            lock_state: trusted_sql(format!("{select_rows} WHERE l.{name} = $1")),
            list_locks: trusted_sql(format!("{select_rows} ORDER BY l.{name}")),
            create_table: trusted_sql(table.create_table_sql(&COLUMN_TYPES)),
            has_token_column: trusted_sql(
                "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = $1::text::regclass \
                 AND attname = lower($2) AND NOT attisdropped)"
                    .to_owned(),
            ),
            add_token_column: trusted_sql(format!(
                "ALTER TABLE {t} ADD COLUMN IF NOT EXISTS {token} {} NOT NULL DEFAULT 0",
                COLUMN_TYPES.token
            )),
        }
    }
}
