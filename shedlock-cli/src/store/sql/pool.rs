//! How the tool opens each SQL database: its connect options, a small pool opened after one
//! connection showed the database can be reached, and the builder settings the tool needs.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::str::FromStr;
use std::time::Duration;

use shedlock_sqlx::SqlLockProviderBuilder;
use shedlock_sqlx::dialect::{Dialect, MySql, Pg, Sqlite};
use sqlx::mysql::MySqlConnectOptions;
use sqlx::pool::PoolOptions;
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, Pool};

use super::super::target::Target;
use crate::cli::DbKind;
use crate::failure::{Exit, Failure};

/// A pool being opened.
pub(super) type Opening<DB> = Pin<Box<dyn Future<Output = Result<Pool<DB>, sqlx::Error>> + Send>>;

/// SQLite waits this long for another process's write to finish.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// How the tool opens each database.
pub(super) trait OpenPool: Dialect {
    /// Which database this is, as `--db` names it.
    const KIND: DbKind;

    /// The connect options of `url`.
    fn options(
        url: &str,
        create: bool,
    ) -> Result<<<Self::Database as sqlx::Database>::Connection as Connection>::Options, sqlx::Error>;

    /// A pool that never connects: only for building a provider to print DDL.
    fn offline_pool() -> Pool<Self::Database>;

    /// The pool of a URL the driver cannot read itself, opened as the provider opens it
    /// (PostgreSQL's multi-host URLs: on the first read-write server); `None`: an ordinary URL.
    fn open_special(_url: &str) -> Option<Opening<Self::Database>> {
        None
    }

    /// The builder settings of this database the tool needs.
    fn for_tool(builder: SqlLockProviderBuilder<Self>) -> SqlLockProviderBuilder<Self> {
        builder
    }
}

/// Opens a connection (failing at once if the database cannot be reached, rather than
/// retrying until the timeout as a pool would), then a small pool for the command.
/// `create`: an SQLite file that does not exist is created rather than refused.
pub(super) async fn open<D: OpenPool>(
    target: &Target,
    timeout: Duration,
    create: bool,
) -> Result<Pool<D::Database>, Failure> {
    let unreachable = |e: &dyn fmt::Display| {
        Failure::new(
            Exit::Error,
            format!("cannot reach the database at {}: {e}", target.shown),
        )
    };
    if let Some(opening) = D::open_special(&target.url) {
        return tokio::time::timeout(timeout, opening)
            .await
            .map_err(|_| unreachable(&format!("no connection within {timeout:?}")))?
            .map_err(|e| unreachable(&e));
    }
    let options = D::options(&target.url, create).map_err(|e| unreachable(&e))?;
    let connection = tokio::time::timeout(timeout, options.connect())
        .await
        .map_err(|_| unreachable(&format!("no connection within {timeout:?}")))?
        .map_err(|e| unreachable(&e))?;
    let _ = connection.close().await;
    Ok(PoolOptions::<D::Database>::new()
        .max_connections(2)
        .acquire_timeout(timeout)
        .connect_lazy_with(options))
}

impl OpenPool for Pg {
    const KIND: DbKind = DbKind::Postgres;

    fn options(url: &str, _create: bool) -> Result<PgConnectOptions, sqlx::Error> {
        PgConnectOptions::from_str(url)
    }

    /// A multi-host URL (`postgres://h1:5432,h2:5432/db`) or one asking for
    /// `target_session_attrs`: the pool of `PgLockProvider::connect_to_primary`, on the first
    /// read-write server and following the primary, as the services' providers do.
    fn open_special(url: &str) -> Option<Opening<Self::Database>> {
        let rest = url.split_once("://")?.1;
        let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
        let hosts = authority
            .rsplit_once('@')
            .map_or(authority, |(_, hosts)| hosts);
        if !hosts.contains(',') && !url.contains("target_session_attrs=") {
            return None;
        }
        let url = url.to_owned();
        Some(Box::pin(async move {
            let provider = shedlock_sqlx::PgLockProvider::connect_to_primary(&url).await?;
            Ok(provider.pool().clone())
        }))
    }

    fn offline_pool() -> Pool<Self::Database> {
        PoolOptions::new().connect_lazy_with(PgConnectOptions::new())
    }

    /// A release by the tool wakes no election: it never listens itself, so it has no
    /// listener to notify about.
    fn for_tool(builder: SqlLockProviderBuilder<Self>) -> SqlLockProviderBuilder<Self> {
        builder.without_release_hints()
    }
}

impl OpenPool for MySql {
    const KIND: DbKind = DbKind::Mysql;

    fn options(url: &str, _create: bool) -> Result<MySqlConnectOptions, sqlx::Error> {
        // sqlx reads `mysql://` URLs; `mariadb://` means the same server protocol.
        match url.strip_prefix("mariadb:") {
            Some(rest) => MySqlConnectOptions::from_str(&format!("mysql:{rest}")),
            None => MySqlConnectOptions::from_str(url),
        }
    }

    fn offline_pool() -> Pool<Self::Database> {
        PoolOptions::new().connect_lazy_with(MySqlConnectOptions::new())
    }
}

impl OpenPool for Sqlite {
    const KIND: DbKind = DbKind::Sqlite;

    fn options(url: &str, create: bool) -> Result<SqliteConnectOptions, sqlx::Error> {
        Ok(SqliteConnectOptions::from_str(url)?
            .create_if_missing(create)
            .busy_timeout(SQLITE_BUSY_TIMEOUT))
    }

    fn offline_pool() -> Pool<Self::Database> {
        PoolOptions::new().connect_lazy_with(SqliteConnectOptions::new())
    }
}
