//! The MySQL/MariaDB statements, built once per provider from the validated table.
//!
//! Times are `DATETIME(3)` in UTC from `UTC_TIMESTAMP(3)`, which MySQL evaluates once per
//! statement; the session time zone never enters. Durations are bound as microseconds.

use sqlx::SqlStr;

use crate::common::{ColumnTypes, Table, trusted_sql};

/// The lock table's column types (`sql/mysql.sql`): times in `DATETIME(3)` (UTC, independent
/// of the session time zone) and a case-sensitive name.
pub(crate) const COLUMN_TYPES: ColumnTypes = ColumnTypes {
    name: "VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
    time: "DATETIME(3)",
    token: "BIGINT",
};

/// The statements of each provider operation.
#[derive(Debug)]
pub(crate) struct Statements {
    /// `?` window µs, `?` holder, `?` window µs, `?` window µs, `?` lease µs, `?` window µs,
    /// `?` lease µs, `?` name (the window: refused if acquired more recently). Takes an expired
    /// lock in place, reporting the new token through `LAST_INSERT_ID` (0: held). Matches 1 row
    /// whenever the lock's row exists.
    pub(crate) acquire: SqlStr,
    /// `?` name, `?` lease µs, `?` holder: first use of a lock name, token 1.
    pub(crate) insert: SqlStr,
    /// `?` name, `?` holder, `?` token: (locked_at, lock_until) of that lease.
    pub(crate) lease_times: SqlStr,
    /// `?` lock_at_least_for µs, `?` name, `?` holder, `?` token: matches 1 row if released.
    pub(crate) release: SqlStr,
    /// `?` lease µs, `?` name, `?` holder, `?` token: matches 1 row if extended.
    pub(crate) extend: SqlStr,
    /// `?` name, `?` token: one row if that lease is live; share-locks the row.
    pub(crate) verify: SqlStr,
    /// `?` name: the row.
    pub(crate) lock_state: SqlStr,
    /// Every row, by name.
    pub(crate) list_locks: SqlStr,
    /// `CREATE TABLE IF NOT EXISTS`.
    pub(crate) create_table: SqlStr,
    /// `?` schema or NULL, `?` table, `?` column: whether the fencing token column exists.
    pub(crate) has_token_column: SqlStr,
    /// Adds the fencing token column to a ShedLock table.
    pub(crate) add_token_column: SqlStr,
}

const NOW: &str = "UTC_TIMESTAMP(3)";

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
        // sqlx sets CLIENT_FOUND_ROWS, so an UPDATE reports the rows its WHERE matched, changed
        // or not. Matching on the name alone and deciding per column with IF() lets one
        // statement tell "held" (1 row, no LAST_INSERT_ID) from "missing" (0 rows) and from
        // "acquired" (LAST_INSERT_ID = new token). MySQL assigns left to right and later
        // expressions see earlier new values, so the columns the condition reads are assigned
        // last: `lock_until`, then `locked_at`, whose own condition reads the new `lock_until`
        // (it equals `now + lease` exactly when this statement took the lock, or when the holder
        // renewed it within the same millisecond, where moving `locked_at` to now only holds
        // the lock longer). Also correct under MariaDB's SIMULTANEOUS_ASSIGNMENT.
        let not_recent = format!("COALESCE({at} <= {NOW} - INTERVAL ? MICROSECOND, TRUE)");
        let free = format!("({until} <= {NOW} AND {not_recent})");
        let acquire = format!(
            "UPDATE {t} SET \
             {by} = IF({free}, ?, {by}), \
             {token} = IF({free}, LAST_INSERT_ID(GREATEST(COALESCE({token}, 0), 0) + 1), {token}), \
             {until} = IF({free}, {NOW} + INTERVAL ? MICROSECOND, {until}), \
             {at} = IF({not_recent} AND {until} = {NOW} + INTERVAL ? MICROSECOND, {NOW}, {at}) \
             WHERE {name} = ?"
        );
        // IGNORE: a concurrent first use inserts too; exactly one of them gets the row.
        let insert = format!(
            "INSERT IGNORE INTO {t} ({name}, {until}, {at}, {by}, {token}) \
             VALUES (?, {NOW} + INTERVAL ? MICROSECOND, {NOW}, ?, 1)"
        );
        let lease_times =
            format!("SELECT {at}, {until} FROM {t} WHERE {name} = ? AND {by} = ? AND {token} = ?");
        let release = format!(
            "UPDATE {t} SET {until} = GREATEST({at} + INTERVAL ? MICROSECOND, {NOW}) \
             WHERE {name} = ? AND {by} = ? AND {token} = ? AND {until} > {NOW}"
        );
        let extend = format!(
            "UPDATE {t} SET {until} = {NOW} + INTERVAL ? MICROSECOND \
             WHERE {name} = ? AND {by} = ? AND {token} = ? AND {until} > {NOW}"
        );
        // LOCK IN SHARE MODE rather than FOR SHARE: MariaDB knows only the former.
        let verify = format!(
            "SELECT 1 FROM {t} WHERE {name} = ? AND {token} = ? AND {until} > {NOW} \
             LOCK IN SHARE MODE"
        );
        let select_rows = format!(
            "SELECT {name}, {until}, {at}, {by}, COALESCE({token}, 0), {until} > {NOW} FROM {t}"
        );
        Statements {
            acquire: trusted_sql(acquire),
            insert: trusted_sql(insert),
            lease_times: trusted_sql(lease_times),
            release: trusted_sql(release),
            extend: trusted_sql(extend),
            verify: trusted_sql(verify),
            lock_state: trusted_sql(format!("{select_rows} WHERE {name} = ?")),
            list_locks: trusted_sql(format!("{select_rows} ORDER BY {name}")),
            create_table: trusted_sql(table.create_table_sql(&COLUMN_TYPES)),
            has_token_column: trusted_sql(
                "SELECT COUNT(*) FROM information_schema.columns \
                 WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ? \
                 AND column_name = ?"
                    .to_owned(),
            ),
            add_token_column: trusted_sql(format!(
                "ALTER TABLE {t} ADD COLUMN {token} {} NOT NULL DEFAULT 0",
                COLUMN_TYPES.token
            )),
        }
    }
}
