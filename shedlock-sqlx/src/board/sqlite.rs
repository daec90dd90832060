//! The board on SQLite: the version is the row's id, `INTEGER PRIMARY KEY AUTOINCREMENT`, which
//! SQLite never hands out twice in a table (also after a delete); every write replaces the
//! key's row (`INSERT OR REPLACE`) with a new one, under its condition, in one statement.
//! Keys compare as `BINARY` (byte order); times are TEXT in UTC from `'now'`, read once per
//! statement.

use shedlock_core::BoardCondition;
use sqlx::{SqlStr, Sqlite, SqliteConnection, SqlitePool};

use super::{BoardDriver, BoardRow, condition_kind};
use crate::trusted_sql;

const NOW: &str = "strftime('%Y-%m-%d %H:%M:%f', 'now')";

/// The board statements of SQLite. All bind `?1` the key (`read_*`: the first key).
#[doc(hidden)]
#[derive(Debug)]
pub struct SqliteBoardStatements {
    /// `?2` value, `?3` time to live as a modifier or NULL, `?4` condition kind, `?5` version:
    /// the new version if written.
    write: SqlStr,
    /// `?2` condition kind, `?3` version: whether the row removed was live.
    remove: SqlStr,
    /// `?2` the end (exclusive): live rows by key.
    read_range: SqlStr,
    /// Live rows by key from `?1` on.
    read_from: SqlStr,
}

impl BoardDriver for Sqlite {
    type BoardStatements = SqliteBoardStatements;

    fn board_statements(b: &str) -> SqliteBoardStatements {
        let live = format!("(expires_at IS NULL OR expires_at > {NOW})");
        let read = format!(
            "SELECT board_key, value, version, written_at, expires_at FROM {b} \
             WHERE board_key >= ?1 AND {live}"
        );
        SqliteBoardStatements {
            write: trusted_sql(format!(
                "INSERT OR REPLACE INTO {b} (board_key, value, written_at, expires_at) \
                 SELECT ?1, ?2, {NOW}, strftime('%Y-%m-%d %H:%M:%f', 'now', ?3) \
                 WHERE CASE ?4 WHEN 0 THEN 1 \
                 WHEN 1 THEN NOT EXISTS (SELECT 1 FROM {b} WHERE board_key = ?1 AND {live}) \
                 ELSE EXISTS (SELECT 1 FROM {b} WHERE board_key = ?1 AND version = ?5 \
                 AND {live}) END \
                 RETURNING version"
            )),
            remove: trusted_sql(format!(
                "DELETE FROM {b} WHERE board_key = ?1 \
                 AND (expires_at <= {NOW} OR ?2 = 0 OR (?2 = 2 AND version = ?3)) \
                 RETURNING {live}"
            )),
            read_range: trusted_sql(format!("{read} AND board_key < ?2 ORDER BY board_key")),
            read_from: trusted_sql(format!("{read} ORDER BY board_key")),
        }
    }

    fn board_create_sql(b: &str) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {b} (\n    \
             version    INTEGER PRIMARY KEY AUTOINCREMENT,\n    \
             board_key  TEXT NOT NULL UNIQUE,\n    \
             value      TEXT NOT NULL,\n    \
             written_at TEXT NOT NULL,\n    \
             expires_at TEXT\n);"
        )
    }

    async fn create_board(pool: &SqlitePool, table: &str) -> Result<(), sqlx::Error> {
        sqlx::query(trusted_sql(Self::board_create_sql(table)))
            .execute(pool)
            .await
            .map(drop)
    }

    async fn board_rows(
        connection: &mut SqliteConnection,
        sql: &SqliteBoardStatements,
        from: &str,
        to: Option<&str>,
    ) -> Result<Vec<BoardRow>, sqlx::Error> {
        match to {
            Some(to) => sqlx::query_as(sql.read_range.clone()).bind(from).bind(to),
            None => sqlx::query_as(sql.read_from.clone()).bind(from),
        }
        .fetch_all(connection)
        .await
    }

    async fn board_write(
        connection: &mut SqliteConnection,
        sql: &SqliteBoardStatements,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl_millis: Option<i64>,
    ) -> Result<Option<i64>, sqlx::Error> {
        let ttl = ttl_millis.map(|ms| format!("+{}.{:03} seconds", ms / 1000, ms % 1000));
        let (kind, version) = condition_kind(condition);
        // Read to the end: the autocommit commit follows the row.
        let written: Vec<i64> = sqlx::query_scalar(sql.write.clone())
            .bind(key)
            .bind(value)
            .bind(ttl)
            .bind(kind)
            .bind(version)
            .fetch_all(connection)
            .await?;
        crate::single(written)
    }

    async fn board_remove(
        connection: &mut SqliteConnection,
        sql: &SqliteBoardStatements,
        key: &str,
        condition: BoardCondition,
    ) -> Result<bool, sqlx::Error> {
        let (kind, version) = condition_kind(condition);
        let removed: Vec<bool> = sqlx::query_scalar(sql.remove.clone())
            .bind(key)
            .bind(kind)
            .bind(version)
            .fetch_all(connection)
            .await?;
        Ok(crate::single(removed)?.unwrap_or(false))
    }
}
