//! The database a command talks to: its kind from the URL's scheme, the URL with its password
//! hidden, and the pool, opened after one connection showed the database can be reached.

use std::str::FromStr;
use std::time::Duration;

use percent_encoding::percent_decode_str;
use shedlock_sqlx::LockProviderBuilder;
use shedlock_sqlx::dialect::{Dialect, MySql, Pg, Sqlite};
use sqlx::mysql::MySqlConnectOptions;
use sqlx::pool::PoolOptions;
use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection, Pool};
use url::Url;

use crate::cli::DbKind;
use crate::failure::{Exit, Failure};

/// SQLite waits this long for another process's write to finish.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// A database URL and what may be shown of it.
#[derive(Debug)]
pub(crate) struct Target {
    pub(crate) kind: DbKind,
    url: String,
    /// The URL as it may be printed: `postgres://user:***@host/db`.
    pub(crate) shown: String,
    /// The user name in the URL, if any.
    pub(crate) user: Option<String>,
    /// Strings that must never be printed: the password as written and decoded.
    secrets: Vec<String>,
}

impl Target {
    /// Reads the database kind from the URL's scheme, and what must not be shown of it.
    pub(crate) fn parse(url: &str) -> Result<Self, Failure> {
        const EXPECTED: &str = "expected postgres://…, mysql://… or sqlite:FILE";
        // The url crate's messages never quote the URL.
        let parsed = Url::parse(url).map_err(|e| {
            Failure::new(
                Exit::Usage,
                format!("--url is not a valid URL ({e}); {EXPECTED}"),
            )
        })?;
        let decoded = |text: &str| percent_decode_str(text).decode_utf8_lossy().into_owned();
        let mut secrets = Vec::new();
        let mut shown = parsed.clone();
        if let Some(password) = parsed.password() {
            secrets.extend([password.to_owned(), decoded(password)]);
            let _ = shown.set_password(Some("***"));
        }
        // PostgreSQL also takes the password as a query parameter.
        secrets.extend(
            parsed
                .query_pairs()
                .filter(|(key, _)| key == "password")
                .map(|(_, value)| value.into_owned()),
        );
        secrets.retain(|s| !s.is_empty() && s != "***");
        let kind = match parsed.scheme() {
            "postgres" | "postgresql" => DbKind::Postgres,
            "mysql" | "mariadb" => DbKind::Mysql,
            "sqlite" => DbKind::Sqlite,
            scheme => {
                return Err(Failure::new(
                    Exit::Usage,
                    format!("--url has the scheme `{scheme}:`; {EXPECTED}"),
                ));
            }
        };
        let shown = secrets.iter().fold(shown.to_string(), |text, secret| {
            text.replace(secret, "***")
        });
        Ok(Target {
            kind,
            url: url.to_owned(),
            shown,
            user: Some(decoded(parsed.username())).filter(|user| !user.is_empty()),
            secrets,
        })
    }

    /// `text` with every secret of the URL replaced by `***`: for every message that might
    /// quote the URL or the password (sqlx's errors among them).
    pub(crate) fn scrub(&self, text: &str) -> String {
        let mut text = text.replace(&self.url, &self.shown);
        for secret in &self.secrets {
            text = text.replace(secret.as_str(), "***");
        }
        text
    }

    /// A failure about this database, its message scrubbed.
    pub(crate) fn fail(&self, exit: Exit, message: impl std::fmt::Display) -> Failure {
        Failure::new(exit, self.scrub(&message.to_string()))
    }

    /// Opens a connection (failing at once if the database cannot be reached, rather than
    /// retrying until the timeout as a pool would), then a small pool for the command.
    /// `create`: an SQLite file that does not exist is created rather than refused.
    pub(crate) async fn pool<D: OpenPool>(
        &self,
        timeout: Duration,
        create: bool,
    ) -> Result<Pool<D::Database>, Failure> {
        let unreachable = |e: &dyn std::fmt::Display| {
            self.fail(
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
    fn for_tool(builder: LockProviderBuilder<Self>) -> LockProviderBuilder<Self> {
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
    fn for_tool(builder: LockProviderBuilder<Self>) -> LockProviderBuilder<Self> {
        builder.without_release_notify()
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
    fn passwords_are_hidden_as_written_and_decoded() {
        let target = Target::parse("postgres://app:s%40cret@db.example:5432/prod").unwrap();
        assert_eq!(target.shown, "postgres://app:***@db.example:5432/prod");
        assert_eq!(
            target.scrub("failed for s@cret and s%40cret"),
            "failed for *** and ***"
        );
        let query = Target::parse("postgres://app@db/prod?password=hunter2").unwrap();
        assert_eq!(query.shown, "postgres://app@db/prod?password=***");
        let file = Target::parse("sqlite:locks.db").unwrap();
        assert_eq!(file.shown, "sqlite:locks.db");
        assert_eq!(file.scrub("at sqlite:locks.db"), "at sqlite:locks.db");
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
