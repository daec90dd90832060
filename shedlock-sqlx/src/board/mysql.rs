//! The board on MySQL and MariaDB: versions from the table's `AUTO_INCREMENT` (persisted by
//! InnoDB since MySQL 8.0 and MariaDB 10.2.4, so never handed out twice), keys `VARBINARY`
//! (byte order, and 1024 bytes fit an InnoDB key), times `DATETIME(3)` in UTC from
//! `UTC_TIMESTAMP(3)`, which MySQL reads once per statement.
//!
//! Neither database returns values from a write on both, so a write is a new row whose version
//! `LAST_INSERT_ID` tells: `Always` a `REPLACE`, `Absent` an `INSERT` (after a duplicate key,
//! a `DELETE` of the row if it expired and the `INSERT` again), `Version` a transaction of a
//! `DELETE` of the live row of that version and the `INSERT`.

use shedlock_core::BoardCondition;
use sqlx::mysql::MySqlDatabaseError;
use sqlx::{Connection as _, MySql, MySqlConnection, MySqlPool, SqlStr};

use super::{BoardDriver, BoardRow, condition_kind};
use crate::trusted_sql;

const NOW: &str = "UTC_TIMESTAMP(3)";

/// MySQL's error number for a duplicate key.
const ER_DUP_ENTRY: u16 = 1062;

/// The board statements of MySQL and MariaDB. All bind the key first, as bytes.
#[doc(hidden)]
#[derive(Debug)]
pub struct MySqlBoardStatements {
    /// `?` value, `?` time to live in µs or NULL: a new row, its version through
    /// `LAST_INSERT_ID`; a duplicate key error when the key has a row.
    insert: SqlStr,
    /// As `insert`, replacing the key's row if it has one.
    replace: SqlStr,
    /// Deletes the key's row if it expired.
    delete_expired: SqlStr,
    /// `?` the version: deletes the key's live row of that version.
    delete_version: SqlStr,
    /// `?` condition kind (three times), `?` version: deletes the key's live row if the
    /// condition holds.
    remove: SqlStr,
    /// `?` the end (exclusive): live rows by key.
    read_range: SqlStr,
    /// Live rows by key from the first key on.
    read_from: SqlStr,
}

/// The columns of a board row, the key as bytes.
type MySqlBoardRow = (
    Vec<u8>,
    String,
    i64,
    chrono::NaiveDateTime,
    Option<chrono::NaiveDateTime>,
);

fn is_duplicate(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|e| e.try_downcast_ref::<MySqlDatabaseError>())
        .is_some_and(|e| e.number() == ER_DUP_ENTRY)
}

impl BoardDriver for MySql {
    type BoardStatements = MySqlBoardStatements;

    fn board_statements(b: &str) -> MySqlBoardStatements {
        let live = format!("(expires_at IS NULL OR expires_at > {NOW})");
        let row = format!(
            "(board_key, value, written_at, expires_at) \
             VALUES (?, ?, {NOW}, {NOW} + INTERVAL ? MICROSECOND)"
        );
        let read = format!(
            "SELECT board_key, value, version, written_at, expires_at FROM {b} \
             WHERE board_key >= ? AND {live}"
        );
        MySqlBoardStatements {
            insert: trusted_sql(format!("INSERT INTO {b} {row}")),
            replace: trusted_sql(format!("REPLACE INTO {b} {row}")),
            delete_expired: trusted_sql(format!(
                "DELETE FROM {b} WHERE board_key = ? AND expires_at <= {NOW}"
            )),
            delete_version: trusted_sql(format!(
                "DELETE FROM {b} WHERE board_key = ? AND version = ? AND {live}"
            )),
            remove: trusted_sql(format!(
                "DELETE FROM {b} WHERE board_key = ? AND {live} \
                 AND (? = 0 OR (? = 2 AND version = ?))"
            )),
            read_range: trusted_sql(format!("{read} AND board_key < ? ORDER BY board_key")),
            read_from: trusted_sql(format!("{read} ORDER BY board_key")),
        }
    }

    fn board_create_sql(b: &str) -> String {
        format!(
            "CREATE TABLE IF NOT EXISTS {b} (\n    \
             board_key  VARBINARY(1024) NOT NULL,\n    \
             value      TEXT CHARACTER SET utf8mb4 NOT NULL,\n    \
             version    BIGINT          NOT NULL AUTO_INCREMENT,\n    \
             written_at DATETIME(3)     NOT NULL,\n    \
             expires_at DATETIME(3)     NULL,\n    \
             PRIMARY KEY (board_key),\n    \
             KEY (version)\n);"
        )
    }

    async fn create_board(pool: &MySqlPool, table: &str) -> Result<(), sqlx::Error> {
        sqlx::query(trusted_sql(Self::board_create_sql(table)))
            .execute(pool)
            .await
            .map(drop)
    }

    async fn board_rows(
        connection: &mut MySqlConnection,
        sql: &MySqlBoardStatements,
        from: &str,
        to: Option<&str>,
    ) -> Result<Vec<BoardRow>, sqlx::Error> {
        let rows: Vec<MySqlBoardRow> = match to {
            Some(to) => sqlx::query_as(sql.read_range.clone())
                .bind(from.as_bytes())
                .bind(to.as_bytes()),
            None => sqlx::query_as(sql.read_from.clone()).bind(from.as_bytes()),
        }
        .fetch_all(connection)
        .await?;
        rows.into_iter()
            .map(|(key, value, version, written_at, expires_at)| {
                let key = String::from_utf8(key).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
                Ok((key, value, version, written_at, expires_at))
            })
            .collect()
    }

    async fn board_write(
        connection: &mut MySqlConnection,
        sql: &MySqlBoardStatements,
        key: &str,
        value: &str,
        condition: BoardCondition,
        ttl_millis: Option<i64>,
    ) -> Result<Option<i64>, sqlx::Error> {
        let ttl = ttl_millis.map(|millis| millis.saturating_mul(1000));
        let write = |statement: &SqlStr| {
            sqlx::query(statement.clone())
                .bind(key.as_bytes())
                .bind(value)
                .bind(ttl)
        };
        let version = |done: sqlx::mysql::MySqlQueryResult| {
            i64::try_from(done.last_insert_id()).unwrap_or(i64::MAX)
        };
        match condition {
            BoardCondition::Always => {
                let done = write(&sql.replace).execute(connection).await?;
                Ok(Some(version(done)))
            }
            BoardCondition::Absent => {
                match write(&sql.insert).execute(&mut *connection).await {
                    Err(e) if is_duplicate(&e) => {}
                    written => return written.map(|done| Some(version(done))),
                }
                let expired = sqlx::query(sql.delete_expired.clone())
                    .bind(key.as_bytes())
                    .execute(&mut *connection)
                    .await?;
                if expired.rows_affected() == 0 {
                    return Ok(None);
                }
                match write(&sql.insert).execute(connection).await {
                    Err(e) if is_duplicate(&e) => Ok(None),
                    written => written.map(|done| Some(version(done))),
                }
            }
            BoardCondition::Version(_) => {
                let mut tx = connection.begin().await?;
                let outcome = async {
                    let deleted = sqlx::query(sql.delete_version.clone())
                        .bind(key.as_bytes())
                        .bind(condition_kind(condition).1)
                        .execute(&mut *tx)
                        .await?;
                    if deleted.rows_affected() == 0 {
                        return Ok(None);
                    }
                    let done = write(&sql.insert).execute(&mut *tx).await?;
                    Ok(Some(version(done)))
                }
                .await;
                crate::dialect::finish(tx, outcome).await
            }
        }
    }

    async fn board_remove(
        connection: &mut MySqlConnection,
        sql: &MySqlBoardStatements,
        key: &str,
        condition: BoardCondition,
    ) -> Result<bool, sqlx::Error> {
        let (kind, version) = condition_kind(condition);
        let removed = sqlx::query(sql.remove.clone())
            .bind(key.as_bytes())
            .bind(kind)
            .bind(kind)
            .bind(version)
            .execute(&mut *connection)
            .await?;
        if removed.rows_affected() > 0 {
            return Ok(true);
        }
        // An expired row is absent for everyone already: it goes too.
        sqlx::query(sql.delete_expired.clone())
            .bind(key.as_bytes())
            .execute(connection)
            .await?;
        Ok(false)
    }
}
