//! MySQL's and MariaDB's batch of acquisitions: a fixed number of statements in one
//! `READ COMMITTED` transaction, however many locks it holds (neither database can return
//! values from an `UPDATE`, nor run several prepared statements in one round trip).
//!
//! 1. `SELECT … FOR UPDATE` of the batch's rows, in name order: locks the rows that exist
//!    (and reads their tokens), so that two instances' batches wait for each other in one
//!    order. `READ COMMITTED` takes no gap locks for the names without a row, which would make
//!    two first uses of the same names deadlock at their inserts.
//! 2. An `UPDATE` joined to the batch (a derived table of its rows) takes the free rows, with
//!    the single acquire's conditions per row (lease, window, tick), on the database clock.
//! 3. An `INSERT IGNORE … SELECT` from the batch creates the missing rows; a row another
//!    instance created meanwhile is left to it.
//! 4. A `SELECT` of the rows this holder has: won are those whose token changed (or that had
//!    no row), the others were already held by this holder.
//!
//! On MariaDB 10.5 and later with sessions in `READ COMMITTED`, one statement instead
//! (`claim_batch`): an `INSERT … SELECT` of the batch `LEFT JOIN`ed to its rows, read
//! `FOR UPDATE` in the batch's order (the provider's, by name), keeping the missing and the
//! free ones with their new values computed from the locked row, `ON DUPLICATE KEY UPDATE`
//! taking those found, `RETURNING` what it wrote. No token needs comparing: a row kept was
//! free while locked, so the statement takes it; a row missing when read is inserted, or, when
//! another transaction inserted it meanwhile, left as that one wrote it (and returned, under
//! that holder: this one's first use racing the same holder's single acquire can be told
//! apart no better than by the transaction's `INSERT IGNORE`). Releases likewise
//! (`release_many`). Both lock rows in the batch's order, which is the table's own for a
//! binary collation (`create_schema`'s); with a case-insensitive one (ShedLock's DDL), an
//! instance on this path and one on the transaction's may lock two names differing in case in
//! opposite orders, a deadlock the server breaks and the provider retries.
//!
//! The statements' text depends on the batch's size, so each size is prepared once per
//! connection.

use std::collections::HashMap;

use chrono::NaiveDateTime;
use shedlock_core::LockConfiguration;
use sqlx::mysql::MySqlArguments;
use sqlx::{Arguments as _, Connection as _, MySql, MySqlConnection};

use super::{NOW, micros};
use crate::dialect::{TickBounds, finish, identifiers};
use crate::{Acquired, Lease, Table, trusted_sql};

/// The batch statements' text around their lists, which only the size changes: `{names}` (one
/// `?` per lock) and `{rows}` (the batch as a derived table).
#[derive(Debug)]
pub(crate) struct BatchStatements {
    lock_rows: String,
    take_free: String,
    insert_missing: String,
    read_won: String,
    held_rows: String,
    release_held: String,
    /// MariaDB's claim of the whole batch in one statement (`{rows}`).
    claim: String,
    /// MariaDB's release of the whole batch in one statement (`{rows}`: `release_rows`).
    release: String,
}

/// The batch as a derived table: one row per lock (name, lease µs, window µs, tick, latest
/// last tick, earliest clock ms). Numbers are cast, so that MySQL types the parameters as
/// integers whatever was bound first.
const FIRST_ROW: &str = "SELECT ? AS lock_name, CAST(? AS SIGNED) AS lease_us, \
     CAST(? AS SIGNED) AS window_us, CAST(? AS SIGNED) AS tick, \
     CAST(? AS SIGNED) AS latest_last, CAST(? AS SIGNED) AS earliest_now";
const NEXT_ROW: &str = " UNION ALL SELECT ?, CAST(? AS SIGNED), CAST(? AS SIGNED), \
     CAST(? AS SIGNED), CAST(? AS SIGNED), CAST(? AS SIGNED)";

impl BatchStatements {
    pub(crate) fn new(table: &Table) -> Self {
        let [t, name, until, at, by, token, last] = identifiers(table);
        let clock_micros = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))";
        let clock_millis =
            format!("(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {NOW}) DIV 1000)");
        // `{rows}` first: MySQL binds parameters in the order of the text. Each assignment
        // reads only its own column, so the order assignments run in does not matter.
        let take_free = format!(
            "UPDATE {t} AS l JOIN ({{rows}}) AS b ON l.{name} = b.lock_name SET \
             l.{last} = COALESCE(b.tick, l.{last}), l.{by} = ?, \
             l.{token} = GREATEST(GREATEST(COALESCE(l.{token}, 0), 0) + 1, {clock_micros}), \
             l.{until} = {NOW} + INTERVAL b.lease_us MICROSECOND, l.{at} = {NOW} \
             WHERE l.{until} <= {NOW} \
             AND COALESCE(l.{at} <= {NOW} - INTERVAL b.window_us MICROSECOND, TRUE) \
             AND COALESCE(l.{last} <= b.latest_last, TRUE) AND {clock_millis} >= b.earliest_now"
        );
        let insert_missing = format!(
            "INSERT IGNORE INTO {t} ({name}, {until}, {at}, {by}, {token}, {last}) \
             SELECT b.lock_name, {NOW} + INTERVAL b.lease_us MICROSECOND, {NOW}, ?, \
             {clock_micros}, b.tick FROM ({{rows}}) AS b WHERE {clock_millis} >= b.earliest_now"
        );
        // MariaDB (`claim_batch`): the batch's rows joined to their rows in the table, read and
        // locked (`FOR UPDATE`, in the batch's order: a `LEFT JOIN` reads its left side
        // first); only the missing ones and those free by the single acquire's conditions go
        // on to the insert, with the new values computed from the locked row. A row found
        // comes back as a duplicate and takes those values; a row missing when read but
        // inserted meanwhile by another transaction (`o` NULL) keeps its own. Every
        // assignment depends on `o` alone, so the order assignments run in does not matter.
        let take = |column: &str| {
            format!("{t}.{column} = IF(o.{name} IS NULL, {t}.{column}, VALUES({column}))")
        };
        let claim = format!(
            "INSERT INTO {t} ({name}, {until}, {at}, {by}, {token}, {last}) \
             SELECT b.lock_name, {NOW} + INTERVAL b.lease_us MICROSECOND, {NOW}, ?, \
             GREATEST(GREATEST(COALESCE(o.{token}, 0), 0) + 1, {clock_micros}), \
             COALESCE(b.tick, o.{last}) \
             FROM ({{rows}}) AS b LEFT JOIN {t} AS o ON o.{name} = b.lock_name \
             WHERE {clock_millis} >= b.earliest_now AND (o.{name} IS NULL OR \
             (o.{until} <= {NOW} \
             AND COALESCE(o.{at} <= {NOW} - INTERVAL b.window_us MICROSECOND, TRUE) \
             AND COALESCE(o.{last} <= b.latest_last, TRUE))) \
             FOR UPDATE ON DUPLICATE KEY UPDATE {}, {}, {}, {}, {} \
             RETURNING {name}, {by}, {token}, {at}, {until}",
            take(by),
            take(token),
            take(until),
            take(at),
            take(last),
        );
        // MariaDB (`release_many`): the live rows of these leases, read and locked in the
        // batch's order (STRAIGHT_JOIN), go on to an insert of themselves, which finds each
        // as a duplicate and ends its lease; RETURNING names them.
        let release = format!(
            "INSERT INTO {t} ({name}, {until}, {at}, {by}, {token}, {last}) \
             SELECT o.{name}, o.{until}, o.{at}, o.{by}, o.{token}, o.{last} \
             FROM ({{rows}}) AS b STRAIGHT_JOIN {t} AS o ON o.{name} = b.lock_name \
             WHERE o.{by} = ? AND o.{token} = b.token AND o.{until} > {NOW} \
             FOR UPDATE ON DUPLICATE KEY UPDATE \
             {t}.{until} = GREATEST({t}.{at} + INTERVAL b.least_us MICROSECOND, {NOW}) \
             RETURNING {name}"
        );
        BatchStatements {
            claim,
            release,
            lock_rows: format!(
                "SELECT {name}, {token} FROM {t} WHERE {name} IN ({{names}}) \
                 ORDER BY {name} FOR UPDATE"
            ),
            take_free,
            insert_missing,
            read_won: format!(
                "SELECT {name}, {token}, {at}, {until} FROM {t} \
                 WHERE {name} IN ({{names}}) AND {by} = ?"
            ),
            held_rows: format!(
                "SELECT {name}, {token} FROM {t} WHERE {name} IN ({{names}}) AND {by} = ? \
                 AND {until} > {NOW} ORDER BY {name} FOR UPDATE"
            ),
            release_held: format!(
                "UPDATE {t} AS l JOIN ({{rows}}) AS b ON l.{name} = b.lock_name \
                 SET l.{until} = GREATEST(l.{at} + INTERVAL b.least_us MICROSECOND, {NOW}) \
                 WHERE l.{by} = ? AND l.{token} = b.token"
            ),
        }
    }
}

/// The leases to release as a derived table: one row per lease (name, token, lock_at_least_for
/// in µs).
fn release_rows(count: usize) -> String {
    let first = "SELECT ? AS lock_name, CAST(? AS SIGNED) AS token, CAST(? AS SIGNED) AS least_us";
    let next = " UNION ALL SELECT ?, CAST(? AS SIGNED), CAST(? AS SIGNED)";
    first.to_owned() + &next.repeat(count.saturating_sub(1))
}

/// `?, ?, …`: `count` parameters.
fn marks(count: usize) -> String {
    vec!["?"; count].join(", ")
}

/// The batch as a derived table of `count` rows.
fn rows(count: usize) -> String {
    FIRST_ROW.to_owned() + &NEXT_ROW.repeat(count.saturating_sub(1))
}

/// Binds `configs` as the rows of [`rows`]; each window is read now.
fn bind_rows(
    arguments: &mut MySqlArguments,
    configs: &[&LockConfiguration],
) -> Result<(), sqlx::Error> {
    for config in configs {
        let tick = TickBounds::of(config);
        add(arguments, config.name())?;
        add(arguments, micros(config.lock_at_most_for()))?;
        add(arguments, micros(config.acquired_within_window()))?;
        add(arguments, tick.tick)?;
        add(arguments, tick.latest_last)?;
        add(arguments, tick.earliest_now)?;
    }
    Ok(())
}

/// Binds `value` next (MySQL binds in the order of the text).
pub(super) fn add<'q, T>(arguments: &mut MySqlArguments, value: T) -> Result<(), sqlx::Error>
where
    T: sqlx::Encode<'q, MySql> + sqlx::Type<MySql> + 'q,
{
    arguments.add(value).map_err(sqlx::Error::Encode)
}

/// Takes each lock of `configs` (sorted, distinct names) that is free, as `holder`: the locks
/// taken, by name.
pub(crate) async fn acquire_batch(
    connection: &mut MySqlConnection,
    sql: &BatchStatements,
    holder: &str,
    configs: &[&LockConfiguration],
) -> Result<Vec<(String, Acquired)>, sqlx::Error> {
    if configs.is_empty() {
        return Ok(Vec::new()); // `IN ()` is no SQL
    }
    let names = marks(configs.len());
    let mut tx = connection
        .begin_with("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION")
        .await?;
    let outcome = async {
        let mut lock_rows = sqlx::query_as::<_, (String, Option<i64>)>(trusted_sql(
            sql.lock_rows.replace("{names}", &names),
        ));
        for config in configs {
            lock_rows = lock_rows.bind(config.name());
        }
        let tokens: HashMap<String, Option<i64>> =
            lock_rows.fetch_all(&mut *tx).await?.into_iter().collect();
        let (existing, missing): (Vec<&LockConfiguration>, Vec<&LockConfiguration>) = configs
            .iter()
            .partition(|config| tokens.contains_key(config.name()));
        if !existing.is_empty() {
            let mut arguments = MySqlArguments::default();
            bind_rows(&mut arguments, &existing)?;
            add(&mut arguments, holder)?;
            let take_free = trusted_sql(sql.take_free.replace("{rows}", &rows(existing.len())));
            sqlx::query_with(take_free, arguments)
                .execute(&mut *tx)
                .await?;
        }
        if !missing.is_empty() {
            let mut arguments = MySqlArguments::default();
            add(&mut arguments, holder)?;
            bind_rows(&mut arguments, &missing)?;
            let insert = trusted_sql(sql.insert_missing.replace("{rows}", &rows(missing.len())));
            sqlx::query_with(insert, arguments)
                .execute(&mut *tx)
                .await?;
        }
        let mut read_won = sqlx::query_as(trusted_sql(sql.read_won.replace("{names}", &names)));
        for config in configs {
            read_won = read_won.bind(config.name());
        }
        let held: Vec<(String, i64, NaiveDateTime, NaiveDateTime)> =
            read_won.bind(holder).fetch_all(&mut *tx).await?;
        Ok((tokens, held))
    }
    .await;
    let (tokens, held) = finish(tx, outcome).await?;
    Ok(held
        .into_iter()
        // A row of this holder whose token did not change was held by it before the batch.
        .filter(|(name, token, _, _)| {
            tokens
                .get(name)
                .is_none_or(|before| *before != Some(*token))
        })
        .map(|(name, token, locked_at, lock_until)| {
            (
                name,
                Acquired {
                    token,
                    locked_at,
                    lock_until,
                },
            )
        })
        .collect())
}

/// Ends each lease of `leases` (sorted, distinct names, one holder) that is live, keeping it
/// until `locked_at + lock_at_least_for` as a single release does: the names released. One
/// `READ COMMITTED` transaction: the live rows of these leases locked and read in name order
/// (the answer: MySQL cannot return rows from an `UPDATE`), then ended by one `UPDATE`.
pub(crate) async fn release_batch(
    connection: &mut MySqlConnection,
    sql: &BatchStatements,
    leases: &[Lease<'_>],
) -> Result<Vec<String>, sqlx::Error> {
    let Some(holder) = leases.first().map(|lease| lease.holder) else {
        return Ok(Vec::new()); // `IN ()` is no SQL
    };
    let mut tx = connection
        .begin_with("SET TRANSACTION ISOLATION LEVEL READ COMMITTED; START TRANSACTION")
        .await?;
    let outcome = async {
        let names = marks(leases.len());
        let mut held_rows = sqlx::query_as::<_, (String, Option<i64>)>(trusted_sql(
            sql.held_rows.replace("{names}", &names),
        ));
        for lease in leases {
            held_rows = held_rows.bind(lease.name);
        }
        let tokens: HashMap<String, Option<i64>> = held_rows
            .bind(holder)
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .collect();
        let live: Vec<&Lease<'_>> = leases
            .iter()
            .filter(|lease| tokens.get(lease.name) == Some(&Some(lease.token)))
            .collect();
        if !live.is_empty() {
            let mut arguments = MySqlArguments::default();
            for lease in &live {
                add(&mut arguments, lease.name)?;
                add(&mut arguments, lease.token)?;
                add(&mut arguments, micros(lease.duration))?;
            }
            add(&mut arguments, holder)?;
            let release = trusted_sql(
                sql.release_held
                    .replace("{rows}", &release_rows(live.len())),
            );
            sqlx::query_with(release, arguments)
                .execute(&mut *tx)
                .await?;
        }
        Ok(live.iter().map(|lease| lease.name.to_owned()).collect())
    }
    .await;
    finish(tx, outcome).await
}

/// MariaDB's [`acquire_batch`]: one statement in autocommit (`BatchStatements::claim`), which
/// needs the session in `READ COMMITTED` (no gap locks where a name has no row: two first
/// uses of the same names would deadlock at their inserts). The rows it returns are those
/// inserted or taken (and, rarely, one another transaction inserted meanwhile): this holder's
/// are the locks won.
pub(crate) async fn claim_batch(
    connection: &mut MySqlConnection,
    sql: &BatchStatements,
    holder: &str,
    configs: &[&LockConfiguration],
) -> Result<Vec<(String, Acquired)>, sqlx::Error> {
    if configs.is_empty() {
        return Ok(Vec::new());
    }
    let mut arguments = MySqlArguments::default();
    add(&mut arguments, holder)?;
    bind_rows(&mut arguments, configs)?;
    let claim = trusted_sql(sql.claim.replace("{rows}", &rows(configs.len())));
    let returned: Vec<(String, String, i64, NaiveDateTime, NaiveDateTime)> =
        sqlx::query_as_with(claim, arguments)
            .fetch_all(connection)
            .await?;
    Ok(returned
        .into_iter()
        .filter(|(_, by, _, _, _)| by == holder)
        .map(|(name, _, token, locked_at, lock_until)| {
            (
                name,
                Acquired {
                    token,
                    locked_at,
                    lock_until,
                },
            )
        })
        .collect())
}

/// MariaDB's [`release_batch`]: one statement in autocommit (`BatchStatements::release`),
/// returning the names released.
pub(crate) async fn release_many(
    connection: &mut MySqlConnection,
    sql: &BatchStatements,
    leases: &[Lease<'_>],
) -> Result<Vec<String>, sqlx::Error> {
    let Some(holder) = leases.first().map(|lease| lease.holder) else {
        return Ok(Vec::new());
    };
    let mut arguments = MySqlArguments::default();
    for lease in leases {
        add(&mut arguments, lease.name)?;
        add(&mut arguments, lease.token)?;
        add(&mut arguments, micros(lease.duration))?;
    }
    add(&mut arguments, holder)?;
    let release = trusted_sql(sql.release.replace("{rows}", &release_rows(leases.len())));
    sqlx::query_scalar_with(release, arguments)
        .fetch_all(connection)
        .await
}
