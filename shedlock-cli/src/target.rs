//! The store a command talks to: its kind from the URL's scheme, the URL with its password
//! hidden, and, for SQL, the pool, opened after one connection showed the database can be
//! reached.
//!
//! | store | URL |
//! |---|---|
//! | PostgreSQL, MySQL/MariaDB, SQLite | `postgres://…`, `mysql://…` (`mariadb://…`), `sqlite:FILE` |
//! | one Redis server | `redis://[:password@]host:port[/db]` (`rediss://` with TLS) |
//! | RedLock | the masters' Redis URLs separated by commas: `redis://h1:6379,redis://h2:6379,redis://h3:6379` |
//! | ZooKeeper | `zookeeper://[user:password@]host:port,host:port[/chroot]` (`zk://` too; the credentials are digest ones) |
//! | etcd | `etcd://[user:password@]host:port,host:port` (the cluster's client endpoints, plain HTTP) |

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
use crate::secrets::{Masked, UrlParts, url_list};

/// SQLite waits this long for another process's write to finish.
const SQLITE_BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// What the URLs may start with, for messages.
const EXPECTED: &str = "expected postgres://…, mysql://…, sqlite:FILE, redis://… (one server), \
                        redis://…,redis://…,… (RedLock masters), zookeeper://host:port,… or \
                        etcd://host:port,…";

/// The kind of store a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StoreKind {
    /// A SQL database.
    Sql(DbKind),
    /// One Redis server.
    Redis,
    /// Independent Redis masters, under RedLock.
    RedLock,
    /// A ZooKeeper ensemble.
    ZooKeeper,
    /// An etcd cluster.
    Etcd,
}

/// A store's URL and what may be shown of it. Its `Debug` shows only the shown URL.
pub(crate) struct Target {
    pub(crate) kind: StoreKind,
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

/// The servers and credentials of a multi-host URL: ZooKeeper's connect string and digest
/// credentials from `zookeeper://`, etcd's endpoints and user from `etcd://`.
pub(crate) struct ClusterAddress {
    /// `host:port,host:port[/chroot]` (ZooKeeper), `http://host:port,…` (etcd).
    pub(crate) connect_string: String,
    /// User and password, percent-decoded.
    pub(crate) credentials: Option<Credentials>,
}

/// A user and password from a URL, percent-decoded.
pub(crate) type Credentials = (String, String);

impl Target {
    /// Reads the store's kind from the URL's scheme, and what may be shown of it. Messages
    /// never quote the URL: the url crate's errors do not, and the scheme is all that is
    /// named of it.
    pub(crate) fn parse(url: &str) -> Result<Self, Failure> {
        let shown = Masked::any(url).shown;
        let scheme = url.trim().split_once("://").map(|(scheme, _)| scheme);
        let ambiguous = url_list(url)
            .into_iter()
            .any(|url| UrlParts::of(url).ambiguous);
        if ambiguous {
            return Err(Failure::new(
                Exit::Usage,
                "the URL has an `@` after its hosts (in its path, query or fragment), so where \
                 its user and password end is unclear: write a `/`, `?`, `#` or `@` in the user \
                 or password percent-encoded (%2F, %3F, %23, %40)",
            ));
        }
        let kind = match scheme {
            Some("zookeeper" | "zk") => StoreKind::ZooKeeper,
            Some("etcd") => StoreKind::Etcd,
            Some("redis" | "rediss") => {
                let urls = url_list(url);
                for master in &urls {
                    redis_url(master)?;
                }
                if urls.len() == 1 {
                    StoreKind::Redis
                } else {
                    StoreKind::RedLock
                }
            }
            _ => return Self::parse_sql(url),
        };
        let target = Target {
            kind,
            url: url.trim().to_owned(),
            shown,
            user: None,
        };
        match kind {
            StoreKind::ZooKeeper => drop(target.zookeeper()?),
            StoreKind::Etcd => drop(target.etcd()?),
            _ => {}
        }
        Ok(target)
    }

    fn parse_sql(url: &str) -> Result<Self, Failure> {
        let parsed = Url::parse(url).map_err(|e| {
            Failure::new(
                Exit::Usage,
                format!("the URL is not a valid URL ({e}); {EXPECTED}"),
            )
        })?;
        let kind = match parsed.scheme() {
            "postgres" | "postgresql" => DbKind::Postgres,
            "mysql" | "mariadb" => DbKind::Mysql,
            "sqlite" => DbKind::Sqlite,
            scheme => {
                return Err(Failure::new(
                    Exit::Usage,
                    format!("the URL has the scheme `{scheme}:`; {EXPECTED}"),
                ));
            }
        };
        let user = percent_decode_str(parsed.username()).decode_utf8_lossy();
        Ok(Target {
            kind: StoreKind::Sql(kind),
            url: url.to_owned(),
            shown: Masked::any(url).shown,
            user: Some(user.into_owned()).filter(|user| !user.is_empty()),
        })
    }

    /// The Redis URLs: one server's, or RedLock's masters.
    pub(crate) fn redis_urls(&self) -> Vec<&str> {
        url_list(&self.url)
    }

    /// The connect string and credentials of a `zookeeper://` URL.
    pub(crate) fn zookeeper(&self) -> Result<ClusterAddress, Failure> {
        let (credentials, hosts) = self.hosts(
            "ZooKeeper",
            "zookeeper://[user:password@]host:port,host:port[/chroot]",
        )?;
        Ok(ClusterAddress {
            connect_string: hosts.to_owned(),
            credentials,
        })
    }

    /// The endpoints (`http://host:port,…`) and credentials of an `etcd://` URL.
    pub(crate) fn etcd(&self) -> Result<ClusterAddress, Failure> {
        let form = "etcd://[user:password@]host:port,host:port";
        let (credentials, hosts) = self.hosts("etcd", form)?;
        if hosts.contains('/') {
            return Err(Failure::new(
                Exit::Usage,
                format!(
                    "the etcd URL has a path (give the key prefix with --key-prefix); expected {form}"
                ),
            ));
        }
        let endpoints: Vec<String> = hosts
            .split(',')
            .map(|host| format!("http://{host}"))
            .collect();
        Ok(ClusterAddress {
            connect_string: endpoints.join(","),
            credentials,
        })
    }

    /// The credentials (percent-decoded) and the hosts (with the path: ZooKeeper's chroot) of
    /// a multi-host URL such as `zookeeper://user:password@h1:2181,h2:2181/chroot`, split as
    /// every URL is ([`UrlParts`]): the userinfo ends at the last `@` before the first `/`.
    fn hosts(&self, store: &str, form: &str) -> Result<(Option<Credentials>, &str), Failure> {
        let usage = |what: &str| {
            Failure::new(
                Exit::Usage,
                format!("the {store} URL {what}; expected {form}"),
            )
        };
        let parts = UrlParts::of(&self.url);
        if parts.query.is_some() || parts.fragment.is_some() {
            return Err(usage("has a query or fragment"));
        }
        let decode = |text: &str| percent_decode_str(text).decode_utf8_lossy().into_owned();
        let credentials = match (parts.user, parts.password) {
            (Some(user), Some(password)) => Some((decode(user), decode(password))),
            (Some(_), None) => return Err(usage("has a user without a password")),
            (None, _) => None,
        };
        if parts.hosts.is_empty() {
            return Err(usage("names no server"));
        }
        // The hosts and the path, as they follow each other in the URL.
        let (_, after) = self.url.split_once("://").unwrap_or_default();
        let start = after.len() - parts.hosts.len() - parts.path.len();
        Ok((credentials, &after[start..]))
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

/// Checks one Redis URL (one master of a RedLock list): a `redis://` or `rediss://` URL.
fn redis_url(url: &str) -> Result<(), Failure> {
    let parsed = Url::parse(url).map_err(|e| {
        Failure::new(
            Exit::Usage,
            format!("a Redis URL is not a valid URL ({e}); {EXPECTED}"),
        )
    })?;
    match parsed.scheme() {
        "redis" | "rediss" => Ok(()),
        scheme => Err(Failure::new(
            Exit::Usage,
            format!("a RedLock list holds a URL with the scheme `{scheme}:`; {EXPECTED}"),
        )),
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
            (
                "redis://:s%40cret@h1:6380,redis://u:s%40cret@h2:6381/1",
                "redis://:***@h1:6380,redis://u:***@h2:6381/1",
            ),
            (
                "zookeeper://app:s%40cret@h1:2181,h2:2181/chroot",
                "zookeeper://app:***@h1:2181,h2:2181/chroot",
            ),
        ] {
            let target = Target::parse(url).unwrap();
            assert_eq!(target.shown, shown);
            let debug = format!("{target:?}");
            assert!(debug.contains(shown) && !debug.contains("cret"), "{debug}");
        }
        let user = Target::parse("mysql://app%2Dro:pw@h/db").unwrap().user;
        assert_eq!(user.as_deref(), Some("app-ro"));
        let zk = Target::parse("zk://app:s%40cret@h1:2181,h2:2181/x").unwrap();
        let address = zk.zookeeper().unwrap();
        assert_eq!(address.connect_string, "h1:2181,h2:2181/x");
        assert_eq!(
            address.credentials,
            Some(("app".to_owned(), "s@cret".to_owned()))
        );
    }

    /// Issue 29 item 6: the credentials of a multi-host URL are read where the masking hides
    /// them (userinfo up to the last `@` before the first `/`), whatever they hold; a URL with
    /// an `@` after its hosts is refused without quoting it.
    #[test]
    fn multi_host_credentials_are_read_where_they_are_masked() {
        for (written, password) in [
            ("s3cr%2Fet", "s3cr/et"),
            ("p@ss:w,rd", "p@ss:w,rd"),
            ("a%40%3A%2C%25%3F%23b", "a@:,%?#b"),
        ] {
            let etcd = format!("etcd://root:{written}@h1:2379,h2:22379");
            let target = Target::parse(&etcd).unwrap();
            assert_eq!(target.shown, "etcd://root:***@h1:2379,h2:22379");
            let address = target.etcd().unwrap();
            assert_eq!(address.connect_string, "http://h1:2379,http://h2:22379");
            let expected = Some(("root".to_owned(), password.to_owned()));
            assert_eq!(address.credentials, expected, "{etcd}");
            for scheme in ["zookeeper", "zk"] {
                let zk = format!("{scheme}://app:{written}@h1:2181,h2:2181/chroot");
                let target = Target::parse(&zk).unwrap();
                assert_eq!(
                    target.shown,
                    format!("{scheme}://app:***@h1:2181,h2:2181/chroot")
                );
                let address = target.zookeeper().unwrap();
                assert_eq!(address.connect_string, "h1:2181,h2:2181/chroot");
                let expected = Some(("app".to_owned(), password.to_owned()));
                assert_eq!(address.credentials, expected, "{zk}");
            }
        }
        for url in [
            "etcd://root:s3cr/et@h1:2379,h2:22379",
            "zookeeper://app:s3cr/et@h1:2181/chroot",
            "zk://app:s3cr?et@h1:2181",
            "postgres://app:s3cr#et@h/db",
            "redis://:s3cr/et@h:6379",
            "redis://h:1,redis://:s3cr/et@h:6379",
            "mysql://root:s3cr/et@h/db",
            "postgres:app:s3cr/et@h/db",
        ] {
            let refused = Target::parse(url).unwrap_err();
            assert_eq!(refused.exit, Exit::Usage, "{url}");
            assert!(!refused.message.contains("s3cr"), "{}", refused.message);
            assert!(refused.message.contains("%2F"), "{}", refused.message);
        }
    }

    #[test]
    fn the_scheme_decides_the_database() {
        let kind = |url: &str| Target::parse(url).unwrap().kind;
        assert_eq!(kind("mysql://root@h/db"), StoreKind::Sql(DbKind::Mysql));
        assert_eq!(kind("sqlite:locks.db"), StoreKind::Sql(DbKind::Sqlite));
        assert_eq!(kind("redis://:pw@h:6379/2"), StoreKind::Redis);
        assert_eq!(
            kind("redis://a:1,rediss://b:2,redis://c:3"),
            StoreKind::RedLock
        );
        assert_eq!(
            kind("zookeeper://h1:2181,h2:2181/app"),
            StoreKind::ZooKeeper
        );
        let mixed = Target::parse("redis://a:1,postgres://u:topsecret@h/db").unwrap_err();
        assert_eq!(mixed.exit, Exit::Usage);
        assert!(!mixed.message.contains("topsecret"), "{}", mixed.message);
        let unknown = Target::parse("oracle://u:topsecret@h/db").unwrap_err();
        assert_eq!(unknown.exit, Exit::Usage);
        assert!(
            !unknown.message.contains("topsecret"),
            "{}",
            unknown.message
        );
    }
}
