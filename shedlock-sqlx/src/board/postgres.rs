//! The board on PostgreSQL: versions from a sequence (`<board>_version`), keys in byte order
//! (`COLLATE "C"`), times `TIMESTAMP` in UTC from `clock_timestamp()`, read once per statement.

use std::time::Duration;

use shedlock_core::BoardCondition;
use sqlx::{PgConnection, PgPool, Postgres, SqlStr};

use super::{BoardDriver, BoardRow, condition_kind, split};
use crate::trusted_sql;

/// The clock, as the lock statements read it.
const NOW: &str = "timezone('utc', clock_timestamp())";

/// Serialises concurrent schema creation across instances, as the lock table's does (the same
/// advisory lock key).
const SCHEMA_LOCK_KEY: i64 = 0x5348_4544_4c4f_434b;

/// The board statements of PostgreSQL. All bind `$1` the key (`read_*`: the first key).
#[doc(hidden)]
#[derive(Debug)]
pub struct PgBoardStatements {
    /// `$2` value, `$3` time to live or NULL, `$4` true to write whatever is there (false:
    /// only where nothing live is): the new version.
    upsert: SqlStr,
    /// `$2` value, `$3` time to live or NULL, `$4` the live version to replace: the new
    /// version.
    replace: SqlStr,
    /// `$2` condition kind, `$3` version: whether the row removed was live.
    remove: SqlStr,
    /// `$2` the end (exclusive): live rows by key.
    read_range: SqlStr,
    /// Live rows by key from `$1` on.
    read_from: SqlStr,
}

/// The sequence the versions come from: `<board>_version` in the board's schema.
fn sequence(table: &str) -> String {
    let (schema, bare) = split(table);
    format!("{schema}{}", crate::runs::index_name(bare, "version"))
}

impl BoardDriver for Postgres {
    type BoardStatements = PgBoardStatements;

    fn board_statements(b: &str) -> PgBoardStatements {
        let seq = sequence(b);
        let live = "(b.expires_at IS NULL OR b.expires_at > db.now)";
        let columns = "b.board_key, b.value, b.version, b.written_at, b.expires_at";
        let read = format!(
            "SELECT {columns} FROM {b} AS b, (SELECT {NOW} AS now) AS db \
             WHERE b.board_key >= $1 AND {live}"
        );
        PgBoardStatements {
            upsert: trusted_sql(format!(
                "INSERT INTO {b} AS b (board_key, value, version, written_at, expires_at) \
                 SELECT $1, $2, nextval('{seq}'), db.now, db.now + $3 \
                 FROM (SELECT {NOW} AS now) AS db \
                 ON CONFLICT (board_key) DO UPDATE SET value = EXCLUDED.value, \
                 version = EXCLUDED.version, written_at = EXCLUDED.written_at, \
                 expires_at = EXCLUDED.expires_at \
                 WHERE $4 OR b.expires_at <= EXCLUDED.written_at \
                 RETURNING b.version"
            )),
            replace: trusted_sql(format!(
                "UPDATE {b} AS b SET value = $2, version = nextval('{seq}'), \
                 written_at = db.now, expires_at = db.now + $3 \
                 FROM (SELECT {NOW} AS now) AS db \
                 WHERE b.board_key = $1 AND b.version = $4 AND {live} \
                 RETURNING b.version"
            )),
            remove: trusted_sql(format!(
                "DELETE FROM {b} AS b USING (SELECT {NOW} AS now) AS db \
                 WHERE b.board_key = $1 \
                 AND (b.expires_at <= db.now OR $2 = 0 OR ($2 = 2 AND b.version = $3)) \
                 RETURNING {live}"
            )),
            read_range: trusted_sql(format!("{read} AND b.board_key < $2 ORDER BY b.board_key")),
            read_from: trusted_sql(format!("{read} ORDER BY b.board_key")),
        }
    }

    fn board_create_sql(b: &str) -> String {
        format!(
            "CREATE SEQUENCE IF NOT EXISTS {seq};\n\
             CREATE TABLE IF NOT EXISTS {b} (\n    \
             board_key  VARCHAR(1024) COLLATE \"C\" NOT NULL,\n    \
             value      TEXT          NOT NULL,\n    \
             version    BIGINT        NOT NULL,\n    \
             written_at TIMESTAMP     NOT NULL,\n    \
             expires_at TIMESTAMP,\n    \
             PRIMARY KEY (board_key)\n);",
            seq = sequence(b)
        )
    }

    async fn create_board(pool: &PgPool, table: &str) -> Result<(), sqlx::Error> {
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(SCHEMA_LOCK_KEY)
            .execute(&mut *tx)
            .await?;
        for statement in Self::board_create_sql(table).split_inclusive(';') {
            sqlx::query(trusted_sql(statement.to_owned()))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await
    }

    async fn board_rows(
        connection: &mut PgConnection,
        sql: &PgBoardStatements,
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
        connection: &mut PgConnection,
        sql: &PgBoardStatements,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl_millis: Option<i64>,
    ) -> Result<Option<i64>, sqlx::Error> {
        let ttl = ttl_millis.map(|millis| Duration::from_millis(millis.unsigned_abs()));
        let query = match condition {
            BoardCondition::Always | BoardCondition::Absent => {
                sqlx::query_scalar(sql.upsert.clone())
                    .bind(key)
                    .bind(value)
                    .bind(ttl)
                    .bind(condition == BoardCondition::Always)
            }
            BoardCondition::Version(_) => sqlx::query_scalar(sql.replace.clone())
                .bind(key)
                .bind(value)
                .bind(ttl)
                .bind(condition_kind(condition).1),
        };
        // Read to the end: the autocommit commit follows the row.
        crate::single(query.fetch_all(connection).await?)
    }

    async fn board_remove(
        connection: &mut PgConnection,
        sql: &PgBoardStatements,
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
