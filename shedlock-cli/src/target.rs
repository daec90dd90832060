//! The database a command talks to: its kind from the URL's scheme, the URL with its password
//! hidden, and the pool, opened after one connection showed the database can be reached.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use percent_encoding::percent_decode_str;
use shedlock_sqlx::SqlLockProviderBuilder;
use shedlock_sqlx::dialect::{Dialect, MySql, Pg, Sqlite};
use sqlx::mysql::MySqlConnectOptions;
use sqlx::pool::PoolOptions;
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, Pool};
use url::Url;

use crate::cli::DbKind;
use crate::failure::{Exit, Failure};
use crate::secrets::Masked;

/// SQLite waits this long for another process's write to finish.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A database URL and what may be shown of it. Its `Debug` shows only the shown URL.
pub(crate) struct Target {
    pub(crate) kind: DbKind,
    url: String,
    /// The URL as it may be printed, rebuilt with its secrets masked:
    /// `postgres://user:***@host/db?password=***`.
    pub(crate) shown: String,
    /// The user name in the URL, if any.
    pub(crate) user: Option<String>,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target")
            .field("kind", &self.kind)
            .field("url", &self.shown)
            .field("user", &self.user)
            .finish()
    }
}

impl Target {
    /// Reads the database kind from the URL's scheme, and what may be shown of it. Messages
    /// never quote the URL: the url crate's errors do not, and the scheme is all that is
    /// named of it.
    pub(crate) fn parse(url: &str) -> Result<Self, Failure> {
        const EXPECTED: &str = "expected postgres://…, mysql://… or sqlite:FILE";
        let parsed = Url::parse(url).map_err(|e| {
            Failure::new(
                Exit::Usage,
                format!("the database URL is not a valid URL ({e}); {EXPECTED}"),
            )
        })?;
        let kind = match parsed.scheme() {
            "postgres" | "postgresql" => DbKind::Postgres,
            "mysql" | "mariadb" => DbKind::Mysql,
            "sqlite" => DbKind::Sqlite,
            scheme => {
                return Err(Failure::new(
                    Exit::Usage,
                    format!("the database URL has the scheme `{scheme}:`; {EXPECTED}"),
                ));
            }
        };
        let user = percent_decode_str(parsed.username()).decode_utf8_lossy();
        Ok(Target {
            kind,
            url: url.to_owned(),
            shown: Masked::of(url, &parsed).shown,
            user: Some(user.into_owned()).filter(|user| !user.is_empty()),
        })
    }

    /// Opens a connection (failing at once if the database cannot be reached, rather than
    /// retrying until the timeout as a pool would), then a small pool for the command.
    /// `create`: an SQLite file that does not exist is created rather than refused.
    pub(crate) async fn pool<D: OpenPool>(
        &self,
        timeout: Duration,
        create: bool,
    ) -> Result<Pool<D::Database>, Failure> {
        let unreachable = |e: &dyn fmt::Display| {
            Failure::new(
                Exit::Error,
                format!("cannot reach the database at {}: {e}", self.shown),
            )
        };
        let options = D::options(&self.url, create).map_err(|e| unreachable(&e))?;
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
}

/// How the tool opens each database.
pub(crate) trait OpenPool: Dialect {
    /// The connect options of `url`.
    fn options(
        url: &str,
        create: bool,
    ) -> Result<<<Self::Database as sqlx::Database>::Connection as Connection>::Options, sqlx::Error>;

    /// A pool that never connects: only for building a provider to print DDL.
    fn offline_pool() -> Pool<Self::Database>;

    /// The builder settings of this database the tool needs.
    fn for_tool(builder: SqlLockProviderBuilder<Self>) -> SqlLockProviderBuilder<Self> {
        builder
    }
}

impl OpenPool for Pg {
    fn options(url: &str, _create: bool) -> Result<PgConnectOptions, sqlx::Error> {
        PgConnectOptions::from_str(url)
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
    fn options(url: &str, create: bool) -> Result<SqliteConnectOptions, sqlx::Error> {
        Ok(SqliteConnectOptions::from_str(url)?
            .create_if_missing(create)
            .busy_timeout(SQLITE_BUSY_TIMEOUT))
    }

    fn offline_pool() -> Pool<Self::Database> {
        PoolOptions::new().connect_lazy_with(SqliteConnectOptions::new())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_masked_url_is_shown_or_debugged() {
        for (url, shown) in [
            (
                "postgres://app:s%40cret@db.example:5432/prod",
                "postgres://app:***@db.example:5432/prod",
            ),
            (
                "postgres://app@db/prod?password=s%40cret+2",
                "postgres://app@db/prod?password=***",
            ),
            ("sqlite:locks.db", "sqlite:locks.db"),
        ] {
            let target = Target::parse(url).unwrap();
            assert_eq!(target.shown, shown);
            let debug = format!("{target:?}");
            assert!(debug.contains(shown) && !debug.contains("cret"), "{debug}");
        }
        let user = Target::parse("mysql://app%2Dro:pw@h/db").unwrap().user;
        assert_eq!(user.as_deref(), Some("app-ro"));
    }

    #[test]
    fn the_scheme_decides_the_database() {
        assert_eq!(
            Target::parse("mysql://root@h/db").unwrap().kind,
            DbKind::Mysql
        );
        assert_eq!(
            Target::parse("sqlite:locks.db").unwrap().kind,
            DbKind::Sqlite
        );
        let unknown = Target::parse("oracle://u:topsecret@h/db").unwrap_err();
        assert_eq!(unknown.exit, Exit::Usage);
        assert!(
            !unknown.message.contains("topsecret"),
            "{}",
            unknown.message
        );
    }
}
