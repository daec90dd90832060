//! A store's URL: as given, and as it may be shown (its secrets masked); and the servers and
//! credentials of a multi-host URL (ZooKeeper's, etcd's).

use std::fmt;

use percent_encoding::percent_decode_str;

use crate::failure::{Exit, Failure};
use crate::secrets::{Masked, UrlParts};

/// A store's URL and what may be shown of it. Its `Debug` shows only the shown URL.
#[derive(Clone)]
pub(crate) struct Target {
    /// As given.
    pub(crate) url: String,
    /// The URL as it may be printed, rebuilt with its secrets masked:
    /// `postgres://user:***@host/db?password=***`.
    pub(crate) shown: String,
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Target").field("url", &self.shown).finish()
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
    /// `url`, and what may be shown of it.
    pub(crate) fn new(url: &str) -> Self {
        Target {
            url: url.to_owned(),
            shown: Masked::any(url).shown,
        }
    }

    /// The scheme of the URL as written, before `://`: `None` for `sqlite:FILE`.
    pub(crate) fn scheme(&self) -> Option<&str> {
        self.url.trim().split_once("://").map(|(scheme, _)| scheme)
    }

    /// The credentials (percent-decoded) and the hosts (with the path: ZooKeeper's chroot) of
    /// a multi-host URL such as `zookeeper://user:password@h1:2181,h2:2181/chroot`, split as
    /// every URL is ([`UrlParts`]): the userinfo ends at the last `@` before the first `/`.
    /// `store` and `form` name the store and its URL's form in messages.
    pub(crate) fn hosts(
        &self,
        store: &str,
        form: &str,
    ) -> Result<(Option<Credentials>, &str), Failure> {
        let usage = |what: &str| {
            Failure::new(
                Exit::Usage,
                format!("the {store} URL {what}; expected {form}"),
            )
        };
        let url = self.url.trim();
        let parts = UrlParts::of(url);
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
        let (_, after) = url.split_once("://").unwrap_or_default();
        let start = after.len() - parts.hosts.len() - parts.path.len();
        Ok((credentials, &after[start..]))
    }
}
