//! The SQLite statements, built once per provider from the validated table.
//!
//! Times are TEXT `YYYY-MM-DD HH:MM:SS.SSS` in UTC (`strftime('%Y-%m-%d %H:%M:%f', 'now')`), so
//! text order is time order. SQLite reads `'now'` once per statement step, and date arithmetic
//! runs on whole milliseconds, so `lock_until - locked_at` is exactly the lease. Stored times
//! are re-read through `strftime`, so rows written by hand in any format SQLite understands
//! (`2025-01-01T10:00:00Z`, …) compare correctly; a time SQLite cannot read counts as expired.
//! Durations are bound as modifiers such as `+600.000 seconds`.

use sqlx::SqlStr;

use crate::common::{ColumnTypes, Table, trusted_sql};

/// The lock table's column types (`sql/sqlite.sql`): times as TEXT in the format above.
pub(crate) const COLUMN_TYPES: ColumnTypes = ColumnTypes {
    name: "VARCHAR(64)",
    time: "TEXT",
    token: "INTEGER",
};

/// The statements of each provider operation.
#[derive(Debug)]
pub(crate) struct Statements {
    /// `?1` name, `?2` holder, `?3` lease modifier, `?4` window modifier (negative; refused if
    /// acquired more recently): one row (token, locked_at, lock_until) if acquired.
    pub(crate) acquire: SqlStr,
    /// `?1` name, `?2` holder, `?3` token, `?4` lock_at_least_for modifier: 1 row changed if
    /// released.
    pub(crate) release: SqlStr,
    /// `?1` name, `?2` holder, `?3` token, `?4` lease modifier: one row (lock_until) if extended.
    pub(crate) extend: SqlStr,
    /// `?1` name, `?2` token: 1 row changed if that lease is live. A write, so the caller's
    /// transaction holds the database's write lock from here on.
    pub(crate) verify: SqlStr,
    /// `?1` name: the row.
    pub(crate) lock_state: SqlStr,
    /// Every row, by name.
    pub(crate) list_locks: SqlStr,
    /// `CREATE TABLE IF NOT EXISTS`.
    pub(crate) create_table: SqlStr,
    /// `?1` table, `?2` schema, `?3` column: whether the fencing token column exists.
    pub(crate) has_token_column: SqlStr,
    /// Adds the fencing token column to an older table.
    pub(crate) add_token_column: SqlStr,
}

const FORMAT: &str = "'%Y-%m-%d %H:%M:%f'";

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
        let now = format!("strftime({FORMAT}, 'now')");
        let stored_until = format!("ifnull(strftime({FORMAT}, l.{until}), '')");
        // Past i64::MAX SQLite would turn the token into a float; NULL there makes the NOT NULL
        // column refuse the update with an error instead.
        let next_token = format!(
            "CASE WHEN ifnull(l.{token}, 0) < 9223372036854775807 \
             THEN max(ifnull(l.{token}, 0), 0) + 1 END"
        );
        let acquire = format!(
            "INSERT INTO {t} AS l ({name}, {until}, {at}, {by}, {token}) \
             VALUES (?1, strftime({FORMAT}, 'now', ?3), {now}, ?2, 1) \
             ON CONFLICT ({name}) DO UPDATE SET {until} = excluded.{until}, \
             {at} = excluded.{at}, {by} = excluded.{by}, {token} = {next_token} \
             WHERE {stored_until} <= excluded.{at} \
             AND ifnull(strftime({FORMAT}, l.{at}), '') <= strftime({FORMAT}, excluded.{at}, ?4) \
             RETURNING {token}, {at}, {until}"
        );
        let owned_and_live =
            format!("l.{name} = ?1 AND l.{by} = ?2 AND l.{token} = ?3 AND {stored_until} > {now}");
        let release = format!(
            "UPDATE {t} AS l SET {until} = max(ifnull(strftime({FORMAT}, l.{at}, ?4), ''), {now}) \
             WHERE {owned_and_live}"
        );
        let extend = format!(
            "UPDATE {t} AS l SET {until} = strftime({FORMAT}, 'now', ?4) WHERE {owned_and_live} \
             RETURNING {until}"
        );
        let verify = format!(
            "UPDATE {t} AS l SET {token} = l.{token} \
             WHERE l.{name} = ?1 AND l.{token} = ?2 AND {stored_until} > {now}"
        );
        let select_rows = format!(
            "SELECT l.{name}, strftime({FORMAT}, l.{until}), strftime({FORMAT}, l.{at}), l.{by}, \
             ifnull(l.{token}, 0), {stored_until} > {now} FROM {t} AS l"
        );
        Statements {
            acquire: trusted_sql(acquire),
            release: trusted_sql(release),
            extend: trusted_sql(extend),
            verify: trusted_sql(verify),
            lock_state: trusted_sql(format!("{select_rows} WHERE l.{name} = ?1")),
            list_locks: trusted_sql(format!("{select_rows} ORDER BY l.{name}")),
            create_table: trusted_sql(table.create_table_sql(&COLUMN_TYPES)),
            has_token_column: trusted_sql(
                "SELECT count(*) FROM pragma_table_info(?1, ?2) WHERE lower(name) = lower(?3)"
                    .to_owned(),
            ),
            add_token_column: trusted_sql(format!(
                "ALTER TABLE {t} ADD COLUMN {token} {} NOT NULL DEFAULT 0",
                COLUMN_TYPES.token
            )),
        }
    }
}
