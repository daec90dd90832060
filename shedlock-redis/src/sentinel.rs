//! Redis Sentinel: a `redis+sentinel://` URL read into the sentinels to ask, the name of the
//! master they watch and its credentials; and the lookup of the master they name now, which a
//! [`Node`](crate::node::Node) repeats after a failover.
//!
//! ```text
//! redis+sentinel://[[user]:password@]host[:port][,host[:port]…]/master_name[/db][?sentinel_username=…&sentinel_password=…]
//! rediss+sentinel://…   TLS to the sentinels and to the master
//! ```
//!
//! The userinfo is the master's (and its replicas'), as in a `redis://` URL; sentinels that
//! ask for a password of their own (`requirepass` in `sentinel.conf`) take it from
//! `sentinel_password`. A host without a port is asked on 26379, Sentinel's port.

use std::time::Duration;

use redis::sentinel::{SentinelClient, SentinelClientBuilder, SentinelServerType};
use redis::{Client, ConnectionAddr, IntoConnectionInfo};
use shedlock_core::Error;
use tokio::sync::Mutex;

use crate::error::ServerErrorKind;
use crate::node::Connect;

/// Sentinel's own port, for a host written without one.
const SENTINEL_PORT: u16 = 26379;

/// Whether `url` names a master through Sentinel (`redis+sentinel://`, `rediss+sentinel://`).
pub(crate) fn is_sentinel_url(url: &str) -> bool {
    scheme(url).is_some()
}

/// Whether the URL asks for TLS, and what follows `://`; `None` when it is no Sentinel URL.
fn scheme(url: &str) -> Option<(bool, &str)> {
    let (scheme, rest) = url.trim().split_once("://")?;
    match scheme.to_ascii_lowercase().as_str() {
        "redis+sentinel" => Some((false, rest)),
        "rediss+sentinel" => Some((true, rest)),
        _ => None,
    }
}

/// The sentinels of one master name, asked for its master.
pub(crate) struct Sentinels {
    client: Mutex<SentinelClient>,
    /// `redis+sentinel://h1:26379,h2:26379/name[/db]`, without credentials.
    shown: String,
    /// The longest one lookup may take: a sentinel's answer and the `ROLE` of the master it
    /// names (three requests).
    lookup_timeout: Duration,
}

impl std::fmt::Debug for Sentinels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sentinels")
            .field("shown", &self.shown)
            .finish_non_exhaustive()
    }
}

/// The URL's parts, every secret decoded.
struct Parts {
    tls: bool,
    sentinels: Vec<ConnectionAddr>,
    master_name: String,
    db: i64,
    username: Option<String>,
    password: Option<String>,
    sentinel_username: Option<String>,
    sentinel_password: Option<String>,
}

fn invalid(message: impl Into<String>) -> Error {
    Error::invalid_config("url", message.into())
}

/// The user and password of `userinfo` (`user:password`, percent-encoded), decoded as a
/// `redis://` URL's are.
fn credentials(userinfo: &str) -> Result<(Option<String>, Option<String>), Error> {
    if userinfo.is_empty() {
        return Ok((None, None));
    }
    let info = format!("redis://{userinfo}@127.0.0.1")
        .into_connection_info()
        .map_err(|_| invalid("the user or password of the Sentinel URL does not parse"))?;
    let settings = info.redis_settings();
    Ok((
        settings.username().map(str::to_owned),
        settings.password().map(str::to_owned),
    ))
}

/// One `host[:port]` of the list: `[v6]:port` too.
fn sentinel_addr(host: &str, tls: bool) -> Result<ConnectionAddr, Error> {
    let has_port = match host.rfind(']') {
        Some(end) => host[end..].contains(':'),
        None => host.contains(':'),
    };
    let with_port = if has_port {
        host.to_owned()
    } else {
        format!("{host}:{SENTINEL_PORT}")
    };
    let info = format!("redis://{with_port}")
        .into_connection_info()
        .map_err(|e| invalid(format!("sentinel `{host}` is not host:port ({e})")))?;
    match info.addr() {
        ConnectionAddr::Tcp(host, port) if tls => Ok(ConnectionAddr::TcpTls {
            host: host.clone(),
            port: *port,
            insecure: false,
            tls_params: None,
        }),
        addr => Ok(addr.clone()),
    }
}

fn parse(url: &str) -> Result<Parts, Error> {
    let (tls, rest) = scheme(url).ok_or_else(|| invalid("not a redis+sentinel:// URL"))?;
    let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, hosts) = authority.rsplit_once('@').unwrap_or(("", authority));
    let (username, password) = credentials(userinfo)?;
    let sentinels = hosts
        .split(',')
        .filter(|host| !host.is_empty())
        .map(|host| sentinel_addr(host, tls))
        .collect::<Result<Vec<_>, _>>()?;
    if sentinels.is_empty() {
        return Err(invalid(
            "a Sentinel URL names its sentinels: redis+sentinel://host:26379,host:26379/master_name",
        ));
    }
    let mut segments = path.split('/').filter(|s| !s.is_empty());
    let master_name = segments
        .next()
        .ok_or_else(|| invalid("a Sentinel URL names the master after its hosts: …/master_name"))?
        .to_owned();
    let db = match segments.next() {
        None => 0,
        Some(db) => db
            .parse()
            .map_err(|_| invalid(format!("database `{db}` is not a number")))?,
    };
    if let Some(extra) = segments.next() {
        return Err(invalid(format!(
            "unexpected `/{extra}` after the master name and database"
        )));
    }
    let (mut sentinel_username, mut sentinel_password) = (None, None);
    for pair in query.split('&').filter(|pair| !pair.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        match name {
            "sentinel_username" => sentinel_username = Some(value),
            "sentinel_password" => sentinel_password = Some(value),
            other => {
                return Err(invalid(format!(
                    "unknown parameter `{other}` (expected sentinel_username, sentinel_password)"
                )));
            }
        }
    }
    let (sentinel_username, sentinel_password) = match (sentinel_username, sentinel_password) {
        (None, None) => (None, None),
        (user, password) => credentials(&format!(
            "{}:{}",
            user.unwrap_or_default(),
            password.unwrap_or_default()
        ))?,
    };
    Ok(Parts {
        tls,
        sentinels,
        master_name,
        db,
        username,
        password,
        sentinel_username,
        sentinel_password,
    })
}

/// `host:port` of an address, as shown in messages.
fn shown_addr(addr: &ConnectionAddr) -> String {
    match addr {
        ConnectionAddr::Tcp(host, port) | ConnectionAddr::TcpTls { host, port, .. } => {
            format!("{host}:{port}")
        }
        other => other.to_string(),
    }
}

impl Sentinels {
    /// Reads `url`, without connecting yet.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] (`url`) naming what is wrong with it (never its password);
    /// (`tls_root_certificates`) when given for a `redis+sentinel://` URL.
    pub(crate) fn open(url: &str, settings: &Connect<'_>) -> Result<Self, Error> {
        let parts = parse(url)?;
        if !parts.tls && settings.tls_root_certificates.is_some() {
            return Err(Error::invalid_config(
                "tls_root_certificates",
                "given for a redis+sentinel:// URL: use rediss+sentinel:// for TLS",
            ));
        }
        if parts.tls && !cfg!(feature = "tls") {
            return Err(invalid(
                "rediss+sentinel:// needs the `tls` feature of shedlock-redis (on by default)",
            ));
        }
        let scheme = if parts.tls {
            "rediss+sentinel"
        } else {
            "redis+sentinel"
        };
        let hosts: Vec<String> = parts.sentinels.iter().map(shown_addr).collect();
        let mut shown = format!("{scheme}://{}/{}", hosts.join(","), parts.master_name);
        if parts.db != 0 {
            shown.push_str(&format!("/{}", parts.db));
        }
        let mut builder = SentinelClientBuilder::new(
            parts.sentinels,
            &parts.master_name,
            SentinelServerType::Master,
        )
        .map_err(|e| invalid(format!("cannot use {shown}: {e}")))?
        .set_client_to_redis_db(parts.db);
        if let Some(username) = &parts.username {
            builder = builder.set_client_to_redis_username(username);
        }
        if let Some(password) = &parts.password {
            builder = builder.set_client_to_redis_password(password);
        }
        if let Some(username) = &parts.sentinel_username {
            builder = builder.set_client_to_sentinel_username(username);
        }
        if let Some(password) = &parts.sentinel_password {
            builder = builder.set_client_to_sentinel_password(password);
        }
        #[cfg(feature = "tls")]
        if parts.tls {
            // rustls needs a crypto provider; ring unless the program installed another.
            let _ = rustls::crypto::ring::default_provider().install_default();
            builder = builder.set_client_to_redis_tls_mode(redis::TlsMode::Secure);
            if let Some(roots) = settings.tls_root_certificates {
                let certificates = || redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(roots.to_vec()),
                };
                builder = builder
                    .set_client_to_redis_certificates(certificates())
                    .set_client_to_sentinel_certificates(certificates());
            }
        }
        let client = builder
            .build()
            .map_err(|e| invalid(format!("cannot use {shown}: {e}")))?;
        Ok(Sentinels {
            client: Mutex::new(client),
            shown,
            lookup_timeout: settings.timeout * 3,
        })
    }

    /// The URL without credentials: `redis+sentinel://h1:26379,h2:26379/name[/db]`.
    pub(crate) fn shown(&self) -> &str {
        &self.shown
    }

    /// The client of the master the sentinels name now: the first sentinel that answers names
    /// a master that is not flagged down, and the master's `ROLE` confirms it (redis-rs's
    /// lookup, which follows the Sentinel clients' guidelines).
    pub(crate) async fn master(&self) -> Result<Client, ServerErrorKind> {
        let mut client = self.client.lock().await;
        match tokio::time::timeout(self.lookup_timeout, client.async_get_client()).await {
            Ok(Ok(master)) => Ok(master),
            Ok(Err(error)) => Err(ServerErrorKind::Redis(error)),
            Err(_) => Err(ServerErrorKind::Timeout(self.lookup_timeout)),
        }
    }
}

/// The address of `client`'s server, `host:port`.
pub(crate) fn address(client: &Client) -> String {
    shown_addr(client.get_connection_info().addr())
}

/// The database and credentials a master's client carries (for tests of the parser).
#[cfg(test)]
fn settings_of(url: &str) -> Result<(Vec<String>, String, redis::RedisConnectionInfo), Error> {
    let parts = parse(url)?;
    let mut info = redis::RedisConnectionInfo::default().set_db(parts.db);
    if let Some(user) = parts.username {
        info = info.set_username(user);
    }
    if let Some(password) = parts.password {
        info = info.set_password(password);
    }
    Ok((
        parts.sentinels.iter().map(shown_addr).collect(),
        parts.master_name,
        info,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls() {
        let (hosts, name, info) =
            settings_of("redis+sentinel://:s%40cret@h1:26380,h2,[::1]:26381/shedlock/2").unwrap();
        assert_eq!(hosts, ["h1:26380", "h2:26379", "::1:26381"]);
        assert_eq!(name, "shedlock");
        assert_eq!(info.db(), 2);
        assert_eq!(info.password(), Some("s@cret"));
        assert_eq!(info.username(), None);
        let (_, _, info) = settings_of("redis+sentinel://u:p@h/m").unwrap();
        assert_eq!((info.username(), info.password()), (Some("u"), Some("p")));
        assert!(is_sentinel_url("REDIS+SENTINEL://h/m"));
        assert!(!is_sentinel_url("redis://h:6379"));
        for bad in [
            "redis+sentinel://h1:26379",
            "redis+sentinel:///m",
            "redis+sentinel://h/m/x",
            "redis+sentinel://h/m/1/2",
            "redis+sentinel://h:port/m",
            "redis+sentinel://h/m?password=x",
        ] {
            let Err(Error::InvalidConfig { field, message, .. }) = settings_of(bad) else {
                panic!("{bad} accepted");
            };
            assert_eq!(field, "url");
            assert!(!message.contains("s3cr3t"), "{message}");
        }
        let parts = parse("rediss+sentinel://h/m?sentinel_password=p%26w").unwrap();
        assert!(parts.tls);
        assert_eq!(parts.sentinel_password.as_deref(), Some("p&w"));
    }
}
