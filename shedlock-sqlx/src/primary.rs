//! PostgreSQL behind a promoted standby: a pool that follows the primary among several servers,
//! as libpq's multi-host URLs with `target_session_attrs=read-write` do.
//!
//! sqlx 0.9 takes one host per URL and does not know `target_session_attrs`. So
//! `PgLockProvider::connect_to_primary` reads the hosts
//! itself, opens the pool on the first server that accepts writes, and registers the pool's
//! connect options here; every connection the provider opens then (`connect::open`) is checked
//! with `SHOW transaction_read_only`, and when it is read-only (a standby) or its server is
//! gone, the servers are asked in turn and the pool is pointed at the first read-write one
//! (`Pool::set_connect_options`, so the service's queries on the pool follow too). A provider
//! never runs a lock statement on a connection found read-only: the operation fails with an
//! error naming the servers and what each answered.

use std::any::Any;
use std::str::FromStr;
use std::sync::{Arc, Mutex, Weak};

use sqlx::postgres::{PgConnectOptions, PgConnection, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions as _, Connection as _, Database, Pool};

/// The servers a pool may follow, in the order they are asked.
#[derive(Debug)]
pub(crate) struct Servers {
    list: Vec<PgConnectOptions>,
}

/// Every pool that follows a primary: its current connect options (weakly, by identity) and its
/// servers.
type Registry = Vec<(Weak<dyn Any + Send + Sync>, Arc<Servers>)>;

static FOLLOWING: Mutex<Registry> = Mutex::new(Vec::new());

fn registry() -> std::sync::MutexGuard<'static, Registry> {
    FOLLOWING.lock().unwrap_or_else(|e| e.into_inner())
}

/// The servers `pool` follows, when it was opened by `connect_to_primary`.
pub(crate) fn servers_of<DB: Database>(pool: &Pool<DB>) -> Option<Arc<Servers>> {
    let options: Arc<dyn Any + Send + Sync> = pool.connect_options();
    let mut registry = registry();
    registry.retain(|(options, _)| options.strong_count() > 0);
    registry
        .iter()
        .find(|(known, _)| std::ptr::addr_eq(known.as_ptr(), Arc::as_ptr(&options)))
        .map(|(_, servers)| Arc::clone(servers))
}

fn register(pool: &PgPool, servers: Arc<Servers>) {
    let options: Arc<dyn Any + Send + Sync> = pool.connect_options();
    registry().push((Arc::downgrade(&options), servers));
}

/// `host:port` of a server, for messages (never its password).
fn server_name(options: &PgConnectOptions) -> String {
    format!("{}:{}", options.get_host(), options.get_port())
}

/// Whether the session on `connection` may write: `SHOW transaction_read_only` is `off` (what
/// libpq's `target_session_attrs=read-write` asks; `on` on a standby in recovery, and on a
/// server set to `default_transaction_read_only`).
pub(crate) async fn is_read_write(connection: &mut PgConnection) -> Result<bool, sqlx::Error> {
    let read_only: String = sqlx::query_scalar("SHOW transaction_read_only")
        .fetch_one(connection)
        .await?;
    Ok(read_only == "off")
}

/// An error for a pool that found no read-write server: it names each server and its answer.
/// A `ConnectionRefused` I/O error: no statement was sent.
fn no_primary(answers: &[String]) -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionRefused,
        format!(
            "no read-write PostgreSQL server (target_session_attrs=read-write): {}",
            answers.join("; ")
        ),
    ))
}

impl Servers {
    /// Parses a libpq multi-host URL (`postgres://user@h1:5432,h2:5433/db?…`; a single host
    /// works too). `target_session_attrs`, if present, must be `read-write` (or `primary`):
    /// that is what the provider does anyway.
    pub(crate) fn parse(url: &str) -> Result<Servers, sqlx::Error> {
        let config = |message: String| sqlx::Error::Configuration(message.into());
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| config("a PostgreSQL URL: postgres://host:port,…/database".into()))?;
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let (userinfo, hosts) = match authority.rsplit_once('@') {
            Some((userinfo, hosts)) => (Some(userinfo), hosts),
            None => (None, authority),
        };
        let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("target_session_attrs", "read-write" | "primary")) => {}
                Some(("target_session_attrs", other)) => {
                    return Err(config(format!(
                        "target_session_attrs={other}: the lock provider needs read-write \
                         (locks are written)"
                    )));
                }
                _ => kept.push(pair),
            }
        }
        let mut list = Vec::new();
        for host in hosts.split(',') {
            let at = userinfo.map_or(String::new(), |u| format!("{u}@"));
            let query = if kept.is_empty() {
                String::new()
            } else {
                format!("?{}", kept.join("&"))
            };
            let single = format!("{scheme}://{at}{host}{path}{query}");
            list.push(PgConnectOptions::from_str(&single)?);
        }
        if list.is_empty() || hosts.is_empty() {
            return Err(config("a PostgreSQL URL without a host".into()));
        }
        Ok(Servers { list })
    }

    /// Separate single-host URLs, asked in this order.
    pub(crate) fn from_urls<I, S>(urls: I) -> Result<Servers, sqlx::Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let list = urls
            .into_iter()
            .map(|url| PgConnectOptions::from_str(url.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        if list.is_empty() {
            return Err(sqlx::Error::Configuration("no PostgreSQL URL".into()));
        }
        Ok(Servers { list })
    }

    /// The first server (in order) that accepts a connection on which the session may write;
    /// the error names every server and its answer.
    pub(crate) async fn find_primary(&self) -> Result<PgConnectOptions, sqlx::Error> {
        let mut answers = Vec::new();
        for options in &self.list {
            let name = server_name(options);
            match options.connect().await {
                Ok(mut connection) => {
                    let writable = is_read_write(&mut connection).await;
                    let _ = connection.close().await;
                    match writable {
                        Ok(true) => return Ok(options.clone()),
                        Ok(false) => answers.push(format!(
                            "{name} is read-only (a standby, or default_transaction_read_only)"
                        )),
                        Err(e) => answers.push(format!("{name}: {e}")),
                    }
                }
                Err(e) => answers.push(format!("{name}: {e}")),
            }
        }
        Err(no_primary(&answers))
    }

    /// Points `pool` at the primary, found anew, and keeps following it.
    pub(crate) async fn repoint<DB: Database>(
        self: &Arc<Self>,
        pool: &Pool<DB>,
    ) -> Result<(), sqlx::Error> {
        let primary = self.find_primary().await?;
        // Only a PostgreSQL pool is ever registered.
        let any: &dyn Any = pool;
        let Some(pool) = any.downcast_ref::<PgPool>() else {
            return Ok(());
        };
        if server_name(&pool.connect_options()) != server_name(&primary) {
            tracing::warn!(
                primary = %server_name(&primary),
                "the PostgreSQL primary moved: the pool now connects to it"
            );
        }
        pool.set_connect_options(primary);
        register(pool, Arc::clone(self));
        Ok(())
    }
}

impl crate::SqlLockProvider<crate::dialect::Pg> {
    /// Connects to whichever of several PostgreSQL servers is the primary, and follows it when
    /// a standby is promoted: `url` is a libpq multi-host URL,
    /// `postgres://user@host1:5432,host2:5432/db?target_session_attrs=read-write` (one host
    /// works too; `target_session_attrs`, if given, must be `read-write` or `primary`).
    ///
    /// The pool opens on the first server, in the URL's order, on which a session may write
    /// (`SHOW transaction_read_only` is `off`). Each connection the provider opens afterwards
    /// is checked the same way; when it is read-only (the server was demoted, or a standby took
    /// the old primary's address) or the server is gone, the servers are asked again in order
    /// and the pool is pointed at the first read-write one (its connect options are replaced,
    /// so the service's queries on [`pool`](Self::pool) follow too). A lock statement never
    /// runs on a connection found read-only; with no read-write server the operation fails
    /// with [`Error::Store`](shedlock_core::Error::Store) naming each server and its answer
    /// (never a password). Providers built on this pool
    /// ([`builder`](Self::builder)`(provider.pool().clone())`) follow the primary too.
    ///
    /// What a failover may cost (asynchronous replication can lose the last grant) is in
    /// `docs/RELIABILITY.md`, "PostgreSQL: a standby promoted".
    ///
    /// # Errors
    /// A configuration error for a URL that is not one; otherwise as [`connect`](Self::connect),
    /// or the "no read-write PostgreSQL server" error above.
    pub async fn connect_to_primary(url: &str) -> Result<Self, sqlx::Error> {
        Ok(Self::new(connect(Servers::parse(url)?).await?))
    }

    /// [`connect_to_primary`](Self::connect_to_primary) with one single-host URL per server,
    /// asked in this order (for settings that differ per server, e.g. TLS certificates).
    ///
    /// # Errors
    /// As [`connect_to_primary`](Self::connect_to_primary); also for an empty list.
    pub async fn connect_to_primary_of<I, S>(urls: I) -> Result<Self, sqlx::Error>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        Ok(Self::new(connect(Servers::from_urls(urls)?).await?))
    }
}

/// The pool of `connect_to_primary`: on the first read-write server of `servers`, otherwise as
/// `connect(url)` makes it (no ping on checkout), registered to follow the primary.
pub(crate) async fn connect(servers: Servers) -> Result<PgPool, sqlx::Error> {
    let servers = Arc::new(servers);
    let primary = servers.find_primary().await?;
    let pool = PgPoolOptions::new()
        .test_before_acquire(false)
        .connect_with(primary)
        .await?;
    register(&pool, servers);
    Ok(pool)
}

/// A connection `connect::open` opened for a pool that follows a primary: kept if it may
/// write; otherwise closed, the pool pointed at the primary found anew, and one opened there.
pub(crate) async fn checked<DB: Database>(
    pool: &Pool<DB>,
    servers: &Arc<Servers>,
    opened: Result<DB::Connection, sqlx::Error>,
) -> Result<Option<DB::Connection>, sqlx::Error> {
    if let Ok(mut connection) = opened {
        let any: &mut dyn Any = &mut connection;
        let writable = match any.downcast_mut::<PgConnection>() {
            Some(pg) => is_read_write(pg).await?,
            None => true,
        };
        if writable {
            return Ok(Some(connection));
        }
        let _ = connection.close().await;
    }
    servers.repoint(pool).await?;
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(url: &str) -> Vec<String> {
        Servers::parse(url)
            .unwrap()
            .list
            .iter()
            .map(server_name)
            .collect()
    }

    #[test]
    fn reads_multi_host_urls() {
        assert_eq!(
            hosts(
                "postgres://u:pw@a:5441,b:5442/db?target_session_attrs=read-write&sslmode=disable"
            ),
            ["a:5441", "b:5442"]
        );
        assert_eq!(hosts("postgresql://a/db"), ["a:5432"]);
        let servers = Servers::parse("postgres://u:pw@a:1,b:2/db?sslmode=require").unwrap();
        assert!(
            servers
                .list
                .iter()
                .all(|o| o.get_database() == Some("db") && o.get_username() == "u")
        );
    }

    #[test]
    fn refuses_what_it_cannot_follow() {
        for url in [
            "postgres://a,b/db?target_session_attrs=read-only",
            "a:1,b:2/db",
            "postgres:///db",
        ] {
            assert!(
                matches!(Servers::parse(url), Err(sqlx::Error::Configuration(_))),
                "{url}"
            );
        }
    }

    #[test]
    fn a_server_is_named_without_its_password() {
        let servers = Servers::parse("postgres://u:hunter2@a:1/db").unwrap();
        let name = server_name(&servers.list[0]);
        assert_eq!(name, "a:1");
        let error = no_primary(&[format!("{name} is read-only (a standby)")]).to_string();
        assert!(
            !error.contains("hunter2") && error.contains("a:1"),
            "{error}"
        );
    }
}
